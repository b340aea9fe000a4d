package remediationexporter

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter/exportertest"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

func TestFactoryCreatesDryRunExporter(t *testing.T) {
	f := NewFactory()
	assert.Equal(t, metadata.Type, f.Type())
	assert.Equal(t, metadata.LogsStability, f.LogsStability())
	set := exportertest.NewNopSettings(metadata.Type)
	exp, err := f.CreateLogs(context.Background(), set, f.CreateDefaultConfig())
	require.NoError(t, err)
	require.NoError(t, exp.Start(context.Background(), componenttest.NewNopHost()))
	assert.False(t, exp.Capabilities().MutatesData)
	// Default: dry run, no platform, no webhook; a DBE is only logged.
	require.NoError(t, exp.ConsumeLogs(context.Background(),
		logsOf(semconv.ScopeFaultRecords, faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "xl003", fault.StateOpen))))
	require.NoError(t, exp.Shutdown(context.Background()))
}

func TestFactoryPlatforms(t *testing.T) {
	f := NewFactory()
	set := exportertest.NewNopSettings(metadata.Type)

	// Kubernetes outside a cluster without a kubeconfig: a clear error.
	cfg := f.CreateDefaultConfig().(*Config)
	cfg.Kubernetes.Enabled = true
	cfg.Kubernetes.Kubeconfig = t.TempDir() + "/missing-kubeconfig"
	_, err := f.CreateLogs(context.Background(), set, cfg)
	assert.ErrorContains(t, err, "remediationexporter: kubernetes")

	// Slurm through scontrol: built (scontrol is run per action, not now).
	cfg = f.CreateDefaultConfig().(*Config)
	cfg.Slurm.Enabled = true
	exp, err := f.CreateLogs(context.Background(), set, cfg)
	require.NoError(t, err)
	require.NoError(t, exp.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, exp.Shutdown(context.Background()))

	_, err = createLogs(context.Background(), set, nil)
	assert.ErrorIs(t, err, errConfigNotRemediation)
}

func TestStartFailsOnUnwritableAuditFile(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.AuditFile = t.TempDir() + "/missing/dir/audit.jsonl"
	exp, err := newRemediationExporter(cfg, componenttest.NewNopTelemetrySettings(), dependencies{})
	require.NoError(t, err)
	assert.Error(t, exp.Start(context.Background(), componenttest.NewNopHost()))
	assert.NoError(t, exp.Shutdown(context.Background()))
}
