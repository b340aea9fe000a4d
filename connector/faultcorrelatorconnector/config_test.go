package faultcorrelatorconnector

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/otelcol-gpu/otelcol-gpu/connector/faultcorrelatorconnector/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/connector/faultcorrelatorconnector/internal/rules"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

// loadConfig unmarshals testdata/config.yaml's faultcorrelator/<name> over
// the default config, as the collector does.
func loadConfig(t *testing.T, name string) *Config {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	sub, err := cm.Sub(component.NewIDWithName(metadata.Type, name).String())
	require.NoError(t, err)
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	require.NoError(t, sub.Unmarshal(cfg))
	return cfg
}

func TestDefaultConfigValid(t *testing.T) {
	require.NoError(t, componenttest.CheckConfigStruct(createDefaultConfig()))
	cfg := loadConfig(t, "")
	require.NoError(t, confmap.Validate(cfg))
	assert.Equal(t, createDefaultConfig(), cfg)
	assert.Equal(t, ModeAgent, cfg.Mode)
	assert.Equal(t, time.Second, cfg.EvaluationInterval)
	assert.Equal(t, 5*time.Minute, cfg.FaultIDBucket)
	assert.Equal(t, 5*time.Minute, cfg.ResolveAfter)
	assert.Equal(t, 100_000, cfg.MaxEntities)
	assert.Equal(t, 256, cfg.MaxSamplesPerSeries)
	assert.Equal(t, 10_000, cfg.MaxOpenFaults)
	assert.Equal(t, 64, cfg.MaxOpenFaultsPerNode)
	assert.Equal(t, 16, cfg.MaxOpenFaultsPerSource)
	assert.Equal(t, 10*time.Minute, cfg.IncidentGap)
	assert.Nil(t, cfg.Rules)
}

func TestFullConfig(t *testing.T) {
	cfg := loadConfig(t, "full")
	require.NoError(t, confmap.Validate(cfg))
	assert.Equal(t, ModeGateway, cfg.Mode)
	assert.Equal(t, 2*time.Second, cfg.EvaluationInterval)
	assert.Equal(t, 10*time.Minute, cfg.FaultIDBucket)
	assert.Equal(t, 15*time.Minute, cfg.ResolveAfter)
	assert.Equal(t, 50_000, cfg.MaxEntities)
	assert.Equal(t, 128, cfg.MaxSamplesPerSeries)
	assert.Equal(t, 2000, cfg.MaxOpenFaults)
	assert.Equal(t, 32, cfg.MaxOpenFaultsPerNode)
	assert.Equal(t, 8, cfg.MaxOpenFaultsPerSource)
	assert.Equal(t, 30*time.Minute, cfg.IncidentGap)

	defaults, err := rules.Default()
	require.NoError(t, err)
	rs, err := cfg.loadRules()
	require.NoError(t, err)
	byName := map[string]rules.Rule{}
	for _, r := range rs {
		byName[r.Name] = r
	}
	assert.Len(t, rs, len(defaults), "one default disabled, one rule added")
	assert.NotContains(t, byName, "sm_low_util_high")

	thermal := byName["thermal_throttling"]
	assert.Equal(t, fault.SeverityP3, thermal.Severity, "the override replaced the default")
	assert.Equal(t, 5*time.Minute, thermal.Window)
	require.Len(t, thermal.Any, 1)
	assert.Equal(t, 5, thermal.Any[0].LastSamples)

	added := byName["xid_43"]
	assert.Equal(t, fault.TypeGPUXID, added.FaultType)
	assert.Equal(t, fault.ActionRestartApp, added.Action)
	require.Len(t, added.All, 1)
	assert.Equal(t, []any{43}, added.All[0].In)
	assert.Equal(t, "xid_43", rs[len(rs)-1].Name, "added rules come after the defaults")
}

func TestInvalidConfigNamesEachKey(t *testing.T) {
	err := confmap.Validate(loadConfig(t, "invalid"))
	require.Error(t, err)
	for _, want := range []string{
		`mode: must be "agent" or "gateway", got "edge"`,
		"evaluation_interval: 0s is under the 100ms floor",
		"fault_id_bucket: must not be negative, got -1m0s",
		"resolve_after: must be greater than 0, got -5s",
		"max_entities: must be greater than 0, got 0",
		"max_samples_per_series: must be greater than 0, got -1",
		"max_open_faults: must be greater than 0, got 0",
		"max_open_faults_per_node: must be greater than 0, got 0",
		"max_open_faults_per_source: must be greater than 0, got -1",
		"incident_gap: must not be negative, got -1s",
		`rules: rules[0]: rules: rule "thermal_throttling": field any[0]: min_samples: 3 can never be met over last_samples: 2`,
	} {
		assert.Contains(t, err.Error(), want)
	}
}

func TestConfigValidateErrors(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*Config)
		want   string
	}{
		{"mode", func(c *Config) { c.Mode = "edge" }, `mode: must be "agent" or "gateway", got "edge"`},
		{"interval", func(c *Config) { c.EvaluationInterval = 0 }, "evaluation_interval: 0s is under the 100ms floor"},
		{"resolve_after", func(c *Config) { c.ResolveAfter = -time.Second }, "resolve_after: must be greater than 0"},
		{"bucket", func(c *Config) { c.FaultIDBucket = -time.Minute }, "fault_id_bucket: must not be negative"},
		{"max_entities", func(c *Config) { c.MaxEntities = 0 }, "max_entities: must be greater than 0"},
		{"max_samples_per_series", func(c *Config) { c.MaxSamplesPerSeries = 0 }, "max_samples_per_series: must be greater than 0"},
		{"max_open_faults", func(c *Config) { c.MaxOpenFaults = -1 }, "max_open_faults: must be greater than 0"},
		{"max_open_faults_per_node", func(c *Config) { c.MaxOpenFaultsPerNode = 0 }, "max_open_faults_per_node: must be greater than 0"},
		{"max_open_faults_per_source", func(c *Config) { c.MaxOpenFaultsPerSource = 0 }, "max_open_faults_per_source: must be greater than 0"},
		{"incident_gap", func(c *Config) { c.IncidentGap = -time.Minute }, "incident_gap: must not be negative"},
		{"rules type", func(c *Config) { c.Rules = 42 }, "rules: must be a YAML string or a list of rules, got int"},
		{"rules unknown field", func(c *Config) { c.Rules = "rules:\n  - name: xid_48\n    sevrity: P1\n" }, "sevrity"},
		{"rules invalid", func(c *Config) {
			c.Rules = []any{map[string]any{"name": "mine", "fault_type": "nope"}}
		}, `rule "mine": field fault_type`},
		{"rules last_samples", func(c *Config) {
			c.Rules = []any{map[string]any{"name": "mine", "fault_type": "gpu.thermal", "severity": "P2", "action": "none",
				"blast_radius": "gpu", "confidence": 0.5, "entity": "gpu", "window": "1m",
				"all": []any{map[string]any{"signal": "s", "agg": "min", "op": ">=", "value": 1, "last_samples": -3}}}}
		}, `rule "mine": field all[0]: last_samples: negative`},
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

// Every signal a default rule reads is one some component emits
// (internal/semconv's registry): a default reading a name nothing writes
// would never fire.
func TestDefaultRulesReadEmittedSignals(t *testing.T) {
	defaults, err := rules.Default()
	require.NoError(t, err)
	for _, r := range defaults {
		for _, c := range append(append([]rules.Condition{}, r.All...), r.Any...) {
			name := rules.SignalName(c.Signal)
			assert.NotEmpty(t, semconv.SignalEmitters(name), "rule %q reads %q, which no component emits (internal/semconv/signals.go)", r.Name, name)
		}
	}
	require.NoError(t, createDefaultConfig().(*Config).Validate())
}

func TestRuleReadingUnknownSignalFailsValidation(t *testing.T) {
	for _, tt := range []struct {
		name  string
		rules any
		want  string
	}{
		{"added rule", []any{map[string]any{"name": "mine", "fault_type": "gpu.thermal", "severity": "P2", "action": "none",
			"blast_radius": "gpu", "confidence": 0.5, "entity": "gpu", "window": "1m",
			"all": []any{map[string]any{"signal": "gpu.temprature{hw.sensor_location=gpu}", "agg": "max", "op": ">", "value": 90}}}},
			`rules: rules: rule "mine": field all[0]: signal: no component emits "gpu.temprature"`},
		{"default overridden",
			"rules:\n  - {name: xid_48, fault_type: gpu.xid, severity: P1, action: cordon, blast_radius: gpu, confidence: 1, entity: gpu, window: 5m, all: [{signal: gpu.xid.code, in: [48]}]}\n",
			`rules: rules: rule "xid_48": field all[0]: signal: no component emits "gpu.xid.code"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := createDefaultConfig().(*Config)
			cfg.Rules = tt.rules
			err := confmap.Validate(cfg)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}
