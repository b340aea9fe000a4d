package remediationexporter

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/exporter/exportertest"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/metadata"
)

func TestRepairConfigDefaultsAndLoad(t *testing.T) {
	def := createDefaultConfig().(*Config).Repair
	assert.False(t, def.Enabled, "repairs are opt-in")
	assert.Equal(t, 10*time.Second, def.PollInterval)
	assert.Equal(t, StepTimeouts{Drain: 4 * time.Hour, Repair: 15 * time.Minute, Reboot: time.Hour, Verify: 2 * time.Hour}, def.StepTimeouts)
	assert.Equal(t, RepairBreakerConfig{MaxRepairs: 10, Window: time.Hour}, def.Breaker)
	assert.Equal(t, "https://{node}:8790", def.Agent.Endpoint)

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

// Acting with the loop on needs an agent client; none is built in until
// internal/repair's is wired (newAgentClient): refused at creation, not
// silently a loop that can only end in rma.
func TestRepairNeedsAnAgentClient(t *testing.T) {
	cfg := loadConfig(t, "repair")
	_, err := NewFactory().CreateLogs(t.Context(), exportertest.NewNopSettings(metadata.Type), cfg)
	require.ErrorContains(t, err, "no repair agent client is built into this collector")

	cfg.DryRun = true
	exp, err := NewFactory().CreateLogs(t.Context(), exportertest.NewNopSettings(metadata.Type), cfg)
	require.NoError(t, err, "a dry run shows the loop without one")
	require.NotNil(t, exp)
}
