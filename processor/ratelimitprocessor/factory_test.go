package ratelimitprocessor

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/otelcol-gpu/otelcol-gpu/processor/ratelimitprocessor/internal/metadata"
)

func TestFactory(t *testing.T) {
	f := NewFactory()
	assert.Equal(t, metadata.Type, f.Type())
	assert.Equal(t, metadata.TracesStability, f.TracesStability())
	assert.Equal(t, metadata.LogsStability, f.LogsStability())
	assert.Equal(t, metadata.MetricsStability, f.MetricsStability())
	ctx := context.Background()
	set := processortest.NewNopSettings(metadata.Type)
	host := componenttest.NewNopHost()

	tp, err := f.CreateTraces(ctx, set, f.CreateDefaultConfig(), consumertest.NewNop())
	require.NoError(t, err)
	assert.True(t, tp.Capabilities().MutatesData)
	require.NoError(t, tp.Start(ctx, host))
	require.NoError(t, tp.Shutdown(ctx))

	lp, err := f.CreateLogs(ctx, set, f.CreateDefaultConfig(), consumertest.NewNop())
	require.NoError(t, err)
	assert.True(t, lp.Capabilities().MutatesData)
	require.NoError(t, lp.Start(ctx, host))
	require.NoError(t, lp.Shutdown(ctx))

	sink := new(consumertest.MetricsSink)
	mp, err := f.CreateMetrics(ctx, set, f.CreateDefaultConfig(), sink)
	require.NoError(t, err)
	assert.False(t, mp.Capabilities().MutatesData)
	require.NoError(t, mp.Start(ctx, host))
	md := pmetric.NewMetrics()
	md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty().SetName("gpu.utilization")
	require.NoError(t, mp.ConsumeMetrics(ctx, md))
	require.Len(t, sink.AllMetrics(), 1)
	assert.Equal(t, md, sink.AllMetrics()[0], "metrics pass through untouched")
	require.NoError(t, mp.Shutdown(ctx))
}

func TestFactoryRefusesOtherConfig(t *testing.T) {
	ctx := context.Background()
	set := processortest.NewNopSettings(metadata.Type)
	_, err := createTraces(ctx, set, struct{}{}, consumertest.NewNop())
	assert.ErrorIs(t, err, errConfigNotRateLimit)
	_, err = createLogs(ctx, set, struct{}{}, consumertest.NewNop())
	assert.ErrorIs(t, err, errConfigNotRateLimit)
	_, err = createMetrics(ctx, set, struct{}{}, consumertest.NewNop())
	assert.ErrorIs(t, err, errConfigNotRateLimit)
}

func TestDisabledSectionsPassThrough(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.Traces.Enabled = false
	cfg.Logs.Enabled = false
	cfg.Traces.Burst, cfg.Logs.Burst = 1, 1
	ctx := context.Background()
	set := processortest.NewNopSettings(metadata.Type)

	traces := new(consumertest.TracesSink)
	tp, err := createTraces(ctx, set, cfg, traces)
	require.NoError(t, err)
	assert.False(t, tp.Capabilities().MutatesData)
	require.NoError(t, tp.ConsumeTraces(ctx, tracesOf(map[string]int{"job": 50})))
	assert.Equal(t, 50, traces.SpanCount())

	logs := new(consumertest.LogsSink)
	lp, err := createLogs(ctx, set, cfg, logs)
	require.NoError(t, err)
	assert.False(t, lp.Capabilities().MutatesData)
	ld := plog.NewLogs()
	addRecords(logsOnHost(ld, "node1", "app"), 50, plog.SeverityNumberDebug, "debug")
	require.NoError(t, lp.ConsumeLogs(ctx, ld))
	assert.Equal(t, 50, logs.LogRecordCount())
}
