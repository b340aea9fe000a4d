package remediationexporter

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/exporter/exportertest"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
)

func TestRepairConfigDefaultsAndLoad(t *testing.T) {
	def := createDefaultConfig().(*Config).Repair
	assert.False(t, def.Enabled, "repairs are opt-in")
	assert.Equal(t, 10*time.Second, def.PollInterval)
	assert.Equal(t, StepTimeouts{Drain: 4 * time.Hour, Repair: 15 * time.Minute, Reboot: time.Hour, Verify: 2 * time.Hour}, def.StepTimeouts)
	assert.Equal(t, RepairBreakerConfig{MaxRepairs: 10, Window: time.Hour}, def.Breaker)
	assert.Equal(t, "https://{node}:8790", def.Agent.Endpoint)
	assert.True(t, def.RequireConfirmation, "the node confirms a fault before it is repaired")

	cfg := loadConfig(t, "repair")
	require.NoError(t, cfg.Validate())
	rc := cfg.Repair
	assert.True(t, rc.Enabled)
	assert.Equal(t, 30*time.Second, rc.PollInterval)
	assert.Equal(t, StepTimeouts{Drain: 2 * time.Hour, Repair: 10 * time.Minute, Reboot: 45 * time.Minute, Verify: time.Hour}, rc.StepTimeouts)
	assert.Equal(t, RepairBreakerConfig{MaxRepairs: 4, Window: 30 * time.Minute}, rc.Breaker)
	assert.Equal(t, RepairAgentConfig{Endpoint: "https://{node}.nodes.example:8790", PrivateKeyFile: "/etc/otelcol-gpu/repair.key"}, rc.Agent)
	assert.Equal(t, []string{"gpu_reset", "reboot"}, cfg.Policy.Rules[0].Repair)
	assert.Equal(t, 3, cfg.Policy.Rules[0].Verify.DiagLevel)
	assert.Equal(t, 10*time.Minute, cfg.Policy.Rules[0].Verify.LinksSteady)
}

func TestRepairConfigValidateNamesKeys(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.DryRun = false
	cfg.Repair = RepairConfig{Enabled: true, Agent: RepairAgentConfig{Endpoint: "http://agent:8790"}}
	err := cfg.Validate()
	require.Error(t, err)
	for _, want := range []string{"repair.poll_interval 0s", "repair.step_timeouts.drain", "repair.step_timeouts.repair", "repair.step_timeouts.reboot",
		"repair.step_timeouts.verify", "repair.breaker.window", "repair.breaker.max_repairs 0", `repair.agent.endpoint "http://agent:8790"`,
		"repair.agent.private_key_file: required"} {
		assert.Contains(t, err.Error(), want)
	}
	cfg.DryRun = true
	cfg.Repair = defaultRepairConfig()
	cfg.Repair.Enabled = true
	assert.NoError(t, cfg.Validate(), "a dry run needs no key")
}

// Acting with the loop on builds internal/repair's signing client from
// the key file; a key that cannot be read fails at creation, naming it. A
// dry run builds none (it calls nothing).
func TestRepairAgentClientFromConfig(t *testing.T) {
	cfg := loadConfig(t, "repair")
	cfg.Repair.Agent.PrivateKeyFile = filepath.Join(t.TempDir(), "missing.key")
	_, err := NewFactory().CreateLogs(t.Context(), exportertest.NewNopSettings(metadata.Type), cfg)
	require.ErrorContains(t, err, "repair.agent: private_key_file")

	_, key, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	der, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(cfg.Repair.Agent.PrivateKeyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600))
	agent, err := newRepairAgent(cfg, exportertest.NewNopSettings(metadata.Type))
	require.NoError(t, err)
	_, ok := agent.(*repair.Client)
	assert.True(t, ok, "internal/repair's client")

	cfg.DryRun = true
	agent, err = newRepairAgent(cfg, exportertest.NewNopSettings(metadata.Type))
	require.NoError(t, err)
	assert.Nil(t, agent, "a dry run calls no agent")
}
