package gpurepairreceiver

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

	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpurepairreceiver/internal/metadata"
)

func TestCreateDefaultConfig(t *testing.T) {
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	require.NoError(t, componenttest.CheckConfigStruct(cfg))
	assert.Equal(t, DefaultEndpoint, cfg.NetAddr.Endpoint)
	assert.Equal(t, []string{"nvidia-smi", "--gpu-reset", "-i", "{index}"}, cfg.GPUReset.Command)
	assert.Equal(t, repair.DefaultMaxSkew, cfg.MaxSkew)
	assert.Equal(t, int64(repair.MaxRequestBytes), cfg.MaxRequestBodySize)
	assert.False(t, cfg.TLS.HasValue())
	err := cfg.Validate()
	require.Error(t, err, "no public key: the receiver does not serve")
	assert.Contains(t, err.Error(), "public_key_file")
	cfg.PublicKeyFile = "/k"
	require.NoError(t, cfg.Validate())
	cfg.GPUReset.Command[0] = "changed"
	assert.Equal(t, "nvidia-smi", DefaultResetCommand[0], "the default is a copy")

	d := cfg.Verify.Diag
	assert.Equal(t, DiagBackendCommand, d.Backend)
	assert.Equal(t, []string{"dcgmi", "diag", "-r", "{level}", "-j", "-i", "{gpus}"}, d.Command)
	assert.Equal(t, DCGMConfig{Mode: DCGMModeStandalone, Endpoint: "localhost:5555"}, d.DCGM)
	assert.Equal(t, DiagTimeoutsConfig{Level1: 10 * time.Minute, Level2: 30 * time.Minute, Level3: 2 * time.Hour}, d.Timeouts)
	assert.Equal(t, 10*time.Second, d.KillGrace)
	assert.False(t, d.AllowWarn)
	assert.Equal(t, LinksConfig{Enabled: true, NodeState: "nodestate", Grace: 2 * time.Minute, Poll: 5 * time.Second}, cfg.Verify.Links)
	d.Command[0] = "changed"
	assert.Equal(t, "dcgmi", DefaultDiagCommand[0], "the default is a copy")
}

func TestLoadConfig(t *testing.T) {
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	load := func(t *testing.T, name string) (*Config, error) {
		t.Helper()
		cfg := NewFactory().CreateDefaultConfig()
		sub, err := cm.Sub(component.NewIDWithName(metadata.Type, name).String())
		require.NoError(t, err)
		require.NoError(t, sub.Unmarshal(cfg))
		return cfg.(*Config), confmap.Validate(cfg)
	}

	cfg, err := load(t, "")
	require.NoError(t, err)
	assert.Equal(t, "/etc/otelcol-gpu/repair/gateway.pub", cfg.PublicKeyFile)
	assert.Equal(t, DefaultEndpoint, cfg.NetAddr.Endpoint)

	cfg, err = load(t, "custom")
	require.NoError(t, err)
	nodestateID := component.MustNewID("nodestate")
	assert.Equal(t, "10.0.0.5:9790", cfg.NetAddr.Endpoint)
	assert.Equal(t, "/etc/otelcol-gpu/repair/tls.crt", cfg.TLS.Get().CertFile)
	assert.Equal(t, "node-7", cfg.HostName)
	assert.Equal(t, 2*time.Minute, cfg.MaxSkew)
	assert.Equal(t, 5000, cfg.ReplayCapacity)
	assert.Equal(t, "/host/proc", cfg.ProcRoot)
	assert.Equal(t, 3*time.Second, cfg.CallTimeout)
	assert.Equal(t, &nodestateID, cfg.NodeState)
	assert.InDelta(t, 0.05, cfg.SMActiveIdle, 1e-9)
	assert.Equal(t, 2*time.Minute, cfg.SMActiveMaxAge)
	assert.Equal(t, []string{"/usr/local/bin/reset-gpu", "--uuid={uuid}"}, cfg.GPUReset.Command)
	assert.Equal(t, 5*time.Minute, cfg.GPUReset.Timeout)
	assert.Equal(t, 30*time.Minute, cfg.Verify.Timeout)
	assert.Equal(t, 20*time.Minute, cfg.Verify.IdleWait)
	assert.Equal(t, 10*time.Second, cfg.Verify.IdlePollInterval)
	assert.Equal(t, 64, cfg.MaxJobs)
	assert.Equal(t, DiagConfig{Backend: DiagBackendDCGM, Command: DefaultDiagCommand,
		DCGM:      DCGMConfig{Mode: DCGMModeStandalone, Endpoint: "unix:///run/nvidia/hostengine.socket"},
		Timeouts:  DiagTimeoutsConfig{Level1: 5 * time.Minute, Level2: 20 * time.Minute, Level3: 90 * time.Minute},
		KillGrace: 30 * time.Second, AllowWarn: true}, cfg.Verify.Diag)
	assert.Equal(t, LinksConfig{Enabled: true, NodeState: "nodestate/own", Grace: 3 * time.Minute, Poll: 10 * time.Second, RequireIB: true}, cfg.Verify.Links)
	id, ok, err := cfg.Verify.Links.nodeStateID()
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, component.MustNewIDWithName("nodestate", "own"), id)

	cfg, err = load(t, "no_links")
	require.NoError(t, err)
	assert.Equal(t, []string{"/usr/local/bin/diag.sh", "--level={level}", "--gpus={gpus}"}, cfg.Verify.Diag.Command)
	assert.False(t, cfg.Verify.Links.Enabled)
	_, ok, err = cfg.Verify.Links.nodeStateID()
	require.NoError(t, err)
	assert.False(t, ok, "an empty id: no nodestate")

	_, err = load(t, "no_key")
	assert.ErrorContains(t, err, "public_key_file")

	_, err = load(t, "bad")
	require.Error(t, err)
	for _, key := range []string{"max_skew", "replay_capacity", "proc_root", "call_timeout", "sm_active_idle", "sm_active_max_age",
		"gpu_reset::command", "names no GPU", "gpu_reset::timeout", "verify::timeout", "verify::idle_wait", "verify::idle_poll_interval", "max_jobs",
		`verify::diag::command: argument 6 "{gpu}": unknown placeholder`, "verify::diag::timeouts::level1", "verify::diag::timeouts::level2",
		"verify::diag::timeouts::level3", "verify::diag::kill_grace", `verify::links::nodestate "not a/valid id"`,
		"verify::links::grace", "verify::links::poll"} {
		assert.Contains(t, err.Error(), key)
	}
	for name, want := range map[string]string{
		"bad_diag":          `verify::diag::backend must be command or dcgm, got "nvvs"`,
		"bad_dcgm":          `verify::diag::dcgm::mode must be standalone or embedded, got "remote"`,
		"bad_dcgm_endpoint": "verify::diag::dcgm::endpoint must not be empty",
		"diag_fixed_level":  "must hold {level} and {gpus}",
	} {
		_, err = load(t, name)
		assert.ErrorContains(t, err, want, name)
	}
}

func TestUnknownKeyRefused(t *testing.T) {
	cfg := NewFactory().CreateDefaultConfig()
	err := confmap.NewFromStringMap(map[string]any{"public_key_file": "/k", "reset_command": "x"}).Unmarshal(cfg)
	assert.Error(t, err)
}
