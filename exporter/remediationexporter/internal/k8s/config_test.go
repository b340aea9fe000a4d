package k8s

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDefaultConfigIsValid(t *testing.T) {
	cfg := NewDefaultConfig()
	require.NoError(t, cfg.Validate())
	assert.Equal(t, "otelcol-gpu.io/gpu-fault", cfg.TaintKey)
	assert.Equal(t, "NoSchedule", cfg.TaintEffect)
	assert.Equal(t, "GPUHealthy", cfg.ConditionType)
	assert.Equal(t, "otelcol-gpu", cfg.Breaker.Namespace)
	assert.Equal(t, "remediation-breaker", cfg.Breaker.Name)
	assert.False(t, cfg.Evict)
	assert.Equal(t, "nvidia.com/gpu.present=true", cfg.GPUNodeLabel)
	assert.Equal(t, RepairNone, cfg.Repair)
}

func TestConfigValidate(t *testing.T) {
	for name, mutate := range map[string]func(*Config){
		"taint key":      func(c *Config) { c.TaintKey = "bad key!" },
		"taint effect":   func(c *Config) { c.TaintEffect = "PreferNoSchedule" },
		"condition type": func(c *Config) { c.ConditionType = "" },
		"maintenance":    func(c *Config) { c.MaintenanceLabel = "a/b/c" },
		"selector":       func(c *Config) { c.GPUNodeSelector = "a in (" },
		"gpu label key":  func(c *Config) { c.GPUNodeLabel = "bad key!=true" },
		"gpu label val":  func(c *Config) { c.GPUNodeLabel = "nvidia.com/gpu.present=" },
		"share zero":     func(c *Config) { c.Breaker.MaxShare = 0 },
		"share above 1":  func(c *Config) { c.Breaker.MaxShare = 1.5 },
		"window":         func(c *Config) { c.Breaker.Window = 0 },
		"breaker ns":     func(c *Config) { c.Breaker.Namespace = "Bad_NS" },
		"lease name":     func(c *Config) { c.Lease.Name = "" },
		"lease duration": func(c *Config) { c.Lease.Duration = 100 * time.Millisecond },
		"repair":         func(c *Config) { c.Repair = "janitor" },
		"repair empty":   func(c *Config) { c.Repair = "" },
	} {
		t.Run(name, func(t *testing.T) {
			cfg := NewDefaultConfig()
			mutate(&cfg)
			assert.Error(t, cfg.Validate())
		})
	}
	cfg := NewDefaultConfig()
	cfg.TaintEffect, cfg.GPUNodeSelector, cfg.MaintenanceLabel = "NoExecute", "nvidia.com/gpu.present=true", ""
	assert.NoError(t, cfg.Validate())
	for _, label := range []string{"", "nvidia.com/gpu.present", "example.com/accelerator=h200"} {
		cfg.GPUNodeLabel = label
		assert.NoError(t, cfg.Validate(), label)
	}
}

func TestConfigValidateNamesTheField(t *testing.T) {
	cfg := NewDefaultConfig()
	cfg.GPUNodeLabel = "=true"
	assert.ErrorContains(t, cfg.Validate(), "gpu_node_label")
	cfg = NewDefaultConfig()
	cfg.Repair = "NVSentinel"
	assert.ErrorContains(t, cfg.Validate(), `repair "NVSentinel"`)
}
