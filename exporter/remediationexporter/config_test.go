package remediationexporter

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap/confmaptest"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/metadata"
)

func loadConfig(t *testing.T, name string) *Config {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	sub, err := cm.Sub(component.NewIDWithName(metadata.Type, name).String())
	require.NoError(t, err)
	cfg := createDefaultConfig().(*Config)
	require.NoError(t, sub.Unmarshal(cfg))
	return cfg
}

func TestDefaultConfig(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	require.NoError(t, componenttest.CheckConfigStruct(cfg))
	require.NoError(t, cfg.Validate())
	assert.True(t, cfg.DryRun, "acting is opt-in")
	assert.Equal(t, 30*time.Minute, cfg.Cooldown)
	assert.Equal(t, 30*time.Minute, cfg.VerificationWindow)
	assert.Equal(t, 3, cfg.MaxAttempts)
	assert.Equal(t, BackoffConfig{Initial: time.Second, Max: 30 * time.Second}, cfg.Backoff)
	assert.Equal(t, 5*time.Second, cfg.Webhook.Timeout)
	assert.Equal(t, 3, cfg.Webhook.Retries)
	assert.Empty(t, cfg.AuditFile)
	assert.Equal(t, cfg, loadConfig(t, ""), "an empty section is the default")
}

func TestLoadConfig(t *testing.T) {
	cfg := loadConfig(t, "acting")
	require.NoError(t, cfg.Validate())
	assert.False(t, cfg.DryRun)
	assert.Equal(t, time.Hour, cfg.Cooldown)
	assert.Equal(t, 45*time.Minute, cfg.VerificationWindow)
	assert.Equal(t, "/var/log/otelcol-gpu/remediation.jsonl", cfg.AuditFile)
	assert.Equal(t, 5, cfg.MaxAttempts)
	assert.Equal(t, BackoffConfig{Initial: 500 * time.Millisecond, Max: 10 * time.Second}, cfg.Backoff)
	require.Len(t, cfg.Policy.Rules, 2)
	assert.Equal(t, []string{"gpu.memory.dbe"}, cfg.Policy.Rules[0].Types)
	assert.Equal(t, []int{45}, cfg.Policy.HoldForHumanXIDs)
	assert.Equal(t, "https://pager-bridge.example/faults", cfg.Webhook.Endpoint)
	assert.Equal(t, "s3cret", string(cfg.Webhook.Secret))
	assert.Equal(t, 4, cfg.Webhook.Retries)
}

func TestValidateRejects(t *testing.T) {
	err := loadConfig(t, "invalid").Validate()
	require.Error(t, err)
	for _, want := range []string{"cannot both be enabled", "max_attempts", "webhook.secret"} {
		assert.Contains(t, err.Error(), want)
	}
	cfg := createDefaultConfig().(*Config)
	cfg.Cooldown, cfg.VerificationWindow = -1, -1
	cfg.Backoff = BackoffConfig{Initial: 0, Max: -1}
	err = cfg.Validate()
	require.Error(t, err)
	for _, want := range []string{"cooldown", "verification_window", "backoff.initial", "backoff.max"} {
		assert.Contains(t, err.Error(), want)
	}
}
