package stragglerprocessor

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"

	"github.com/otelcol-gpu/otelcol-gpu/processor/stragglerprocessor/internal/straggler"
)

func TestDefaultConfigIsValid(t *testing.T) {
	cfg := defaultConfig()
	require.NoError(t, cfg.Validate())
	require.NoError(t, componenttest.CheckConfigStruct(cfg))
	assert.Equal(t, straggler.DefaultOptions(), cfg.detectionOptions())
	assert.Equal(t, straggler.PersistenceOptions{K: 3, N: 5}, cfg.persistenceOptions())
	assert.Equal(t, 30*time.Second, cfg.ClockSkewWarning)
}

func TestConfigUnmarshal(t *testing.T) {
	cfg := defaultConfig()
	conf := confmap.NewFromStringMap(map[string]any{
		"decision_wait": "5s", "max_jobs": 10, "slow_step_window": 50, "rule": "mean_factor", "factor": 2.5,
		"persistence_k": 2, "persistence_n": 4, "clock_skew_warning": "1m",
	})
	require.NoError(t, conf.Unmarshal(cfg))
	require.NoError(t, cfg.Validate())
	assert.Equal(t, 5*time.Second, cfg.DecisionWait)
	assert.Equal(t, 10, cfg.MaxJobs)
	assert.Equal(t, 50, cfg.SlowStepWindow)
	assert.Equal(t, time.Minute, cfg.ClockSkewWarning)
	o := cfg.detectionOptions()
	assert.Equal(t, straggler.RuleMeanFactor, o.Rule)
	assert.InDelta(t, 2.5, o.Factor, 0)
	assert.Equal(t, straggler.PersistenceOptions{K: 2, N: 4}, cfg.persistenceOptions())
}

// max_held_spans, the bound of the spans this processor no longer holds, is
// gone: like any unknown key, the collector's unmarshal refuses it and names
// it (max_held_ranks replaced it).
func TestRemovedMaxHeldSpansIsRefused(t *testing.T) {
	cfg := defaultConfig()
	err := confmap.NewFromStringMap(map[string]any{"max_held_spans": 262144}).Unmarshal(cfg)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "max_held_spans")

	cfg = defaultConfig()
	require.NoError(t, confmap.NewFromStringMap(map[string]any{"max_held_ranks": 4096}).Unmarshal(cfg))
	require.NoError(t, cfg.Validate())
	assert.Equal(t, 4096, cfg.MaxHeldRanks)
}

func TestConfigValidateNamesTheKey(t *testing.T) {
	tests := map[string]func(*Config){
		"decision_wait":          func(c *Config) { c.DecisionWait = 0 },
		"max_jobs":               func(c *Config) { c.MaxJobs = 0 },
		"max_open_steps_per_job": func(c *Config) { c.MaxOpenStepsPerJob = -1 },
		"max_ranks_per_step":     func(c *Config) { c.MaxRanksPerStep = 0 },
		"max_held_ranks":         func(c *Config) { c.MaxHeldRanks = 0 },
		"slow_step_window":       func(c *Config) { c.SlowStepWindow = 0 },
		"slow_step_factor":       func(c *Config) { c.SlowStepFactor = math.NaN() },
		"rule":                   func(c *Config) { c.Rule = "vibes" },
		"factor":                 func(c *Config) { c.Factor = 0.5 },
		"persistence_k":          func(c *Config) { c.PersistenceK, c.PersistenceN = 6, 5 },
		"clock_skew_warning":     func(c *Config) { c.ClockSkewWarning = -time.Second },
	}
	for key, breakIt := range tests {
		t.Run(key, func(t *testing.T) {
			cfg := defaultConfig()
			breakIt(cfg)
			err := cfg.Validate()
			require.Error(t, err)
			assert.Contains(t, err.Error(), key)
		})
	}
}
