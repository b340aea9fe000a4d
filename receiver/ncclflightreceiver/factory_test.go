package ncclflightreceiver

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/metadata"
)

func TestFactory(t *testing.T) {
	f := NewFactory()
	assert.Equal(t, metadata.Type, f.Type())
	assert.Equal(t, metadata.TracesStability, f.TracesStability())
	assert.Equal(t, metadata.MetricsStability, f.MetricsStability())
	assert.Equal(t, metadata.LogsStability, f.LogsStability())
	require.NoError(t, componenttest.CheckConfigStruct(f.CreateDefaultConfig()))
}

// One configuration's three pipelines share one receiver: it starts once
// with the first, and its goroutines are gone after the last shutdown
// (goleak checks).
func TestLifecycle(t *testing.T) {
	f := NewFactory()
	cfg := f.CreateDefaultConfig().(*Config)
	cfg.FlightRecorder.Directories = []string{t.TempDir()}
	cfg.Inspector.Directories = []string{t.TempDir()}
	set := receivertest.NewNopSettings(metadata.Type)
	ctx := context.Background()
	traces, err := f.CreateTraces(ctx, set, cfg, consumertest.NewNop())
	require.NoError(t, err)
	metrics, err := f.CreateMetrics(ctx, set, cfg, consumertest.NewNop())
	require.NoError(t, err)
	logs, err := f.CreateLogs(ctx, set, cfg, consumertest.NewNop())
	require.NoError(t, err)
	host := componenttest.NewNopHost()
	for _, c := range []interface {
		Start(context.Context, component.Host) error
	}{traces, metrics, logs} {
		require.NoError(t, c.Start(ctx, host))
	}
	require.NoError(t, traces.Shutdown(ctx))
	require.NoError(t, metrics.Shutdown(ctx))
	require.NoError(t, logs.Shutdown(ctx))
}

func TestFactoryRefusesOtherConfig(t *testing.T) {
	_, err := NewFactory().CreateTraces(context.Background(), receivertest.NewNopSettings(metadata.Type), struct{}{}, consumertest.NewNop())
	assert.ErrorIs(t, err, errConfigNotNCCL)
}
