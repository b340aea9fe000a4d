package faultcorrelator

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDefaultConfigValid(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	require.NoError(t, cfg.Validate())
	assert.Equal(t, ModeAgent, cfg.Mode)
	assert.Equal(t, 5*time.Second, cfg.EvaluationInterval)
	assert.Equal(t, 5*time.Minute, cfg.FaultIDBucket)
	assert.Equal(t, 5*time.Minute, cfg.ResolveAfter)
}

func TestConfigValidateErrors(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*Config)
		want   string
	}{
		{"mode", func(c *Config) { c.Mode = "edge" }, `mode: must be "agent" or "gateway", got "edge"`},
		{"interval", func(c *Config) { c.EvaluationInterval = 0 }, "evaluation_interval: must be greater than 0"},
		{"resolve_after", func(c *Config) { c.ResolveAfter = -time.Second }, "resolve_after: must be greater than 0"},
		{"bucket", func(c *Config) { c.FaultIDBucket = -time.Minute }, "fault_id_bucket: must not be negative"},
		{"max_entities", func(c *Config) { c.MaxEntities = 0 }, "max_entities: must be greater than 0"},
		{"max_open_faults", func(c *Config) { c.MaxOpenFaults = -1 }, "max_open_faults: must be greater than 0"},
		{"rules type", func(c *Config) { c.Rules = 42 }, "rules: must be a YAML string or a list of rules, got int"},
		{"rules unknown field", func(c *Config) { c.Rules = "rules:\n  - name: xid_48\n    sevrity: P1\n" }, "sevrity"},
		{"rules invalid", func(c *Config) {
			c.Rules = []any{map[string]any{"name": "mine", "fault_type": "nope"}}
		}, `rule "mine": field fault_type`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := createDefaultConfig().(*Config)
			tt.modify(cfg)
			err := cfg.Validate()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestRulesMergeOverDefaults(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	defaults, err := cfg.loadRules()
	require.NoError(t, err)

	// A list from the collector's YAML: switch one default off, add one.
	cfg.Rules = []any{
		map[string]any{"name": "xid_48", "disabled": true},
		map[string]any{"name": "xid_43", "fault_type": "gpu.xid", "severity": "P4", "action": "none",
			"blast_radius": "gpu", "confidence": 1.0, "entity": "gpu", "window": "5m",
			"all": []any{map[string]any{"signal": "gpu.xid", "in": []any{43}}}},
	}
	require.NoError(t, cfg.Validate())
	rs, err := cfg.loadRules()
	require.NoError(t, err)
	assert.Len(t, rs, len(defaults)) // one off, one on
	names := map[string]bool{}
	for _, r := range rs {
		names[r.Name] = true
	}
	assert.False(t, names["xid_48"])
	assert.True(t, names["xid_43"])

	// The same as a YAML string.
	cfg.Rules = "rules:\n  - {name: xid_48, disabled: true}\n"
	rs, err = cfg.loadRules()
	require.NoError(t, err)
	assert.Len(t, rs, len(defaults)-1)
}
