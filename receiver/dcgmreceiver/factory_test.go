package dcgmreceiver

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/metadata"
)

func TestFactoryType(t *testing.T) {
	f := NewFactory()
	assert.Equal(t, metadata.Type, f.Type())
	assert.Equal(t, metadata.MetricsStability, f.MetricsStability())
	assert.Equal(t, metadata.LogsStability, f.LogsStability())
}

// The metrics and logs pipelines of one config share one receiver: one
// source, one connection.
func TestMetricsAndLogsShareOneReceiver(t *testing.T) {
	f := NewFactory()
	cfg := f.CreateDefaultConfig().(*Config)
	set := receivertest.NewNopSettings(metadata.Type)
	mr, err := f.CreateMetrics(context.Background(), set, cfg, consumertest.NewNop())
	require.NoError(t, err)
	lr, err := f.CreateLogs(context.Background(), set, cfg, consumertest.NewNop())
	require.NoError(t, err)
	assert.Same(t, mr, lr)

	other := f.CreateDefaultConfig().(*Config)
	or, err := f.CreateMetrics(context.Background(), set, other, consumertest.NewNop())
	require.NoError(t, err)
	assert.NotSame(t, mr, or, "another config is another receiver")
	require.NoError(t, or.Shutdown(context.Background()))
	require.NoError(t, mr.Shutdown(context.Background()))
	require.NoError(t, lr.Shutdown(context.Background()))
}

// On a node without DCGM (this machine, CI) the receiver starts, logs once,
// keeps retrying, and shuts down promptly: the collector is never held up.
func TestStartsAndStopsWithoutDCGM(t *testing.T) {
	f := NewFactory()
	cfg := f.CreateDefaultConfig().(*Config)
	cfg.Source = SourceDCGM
	core, obs := observer.New(zap.InfoLevel)
	set := receivertest.NewNopSettings(metadata.Type)
	set.Logger = zap.New(core)
	sink := new(consumertest.MetricsSink)
	r, err := f.CreateMetrics(context.Background(), set, cfg, sink)
	require.NoError(t, err)
	require.NoError(t, r.Start(context.Background(), componenttest.NewNopHost()))
	require.Eventually(t, func() bool { return obs.FilterMessageSnippet("GPU source unavailable").Len() == 1 },
		10*time.Second, 10*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, r.Shutdown(ctx))
	assert.Zero(t, sink.DataPointCount())
}
