package ibreceiver

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ibreceiver/internal/metadata"
)

func TestFactory(t *testing.T) {
	f := NewFactory()
	assert.Equal(t, metadata.Type, f.Type())
	assert.Equal(t, component.StabilityLevelAlpha, f.MetricsStability())

	cfg := f.CreateDefaultConfig()
	r, err := f.CreateMetrics(context.Background(), receivertest.NewNopSettings(metadata.Type), cfg, consumertest.NewNop())
	require.NoError(t, err)
	require.NotNil(t, r)
	require.NoError(t, r.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, r.Shutdown(context.Background()))
}

func TestFactoryWrongConfig(t *testing.T) {
	_, err := createMetrics(context.Background(), receivertest.NewNopSettings(metadata.Type), &struct{}{}, consumertest.NewNop())
	require.ErrorIs(t, err, errConfigNotIB)
}

func TestReceiverEndToEnd(t *testing.T) {
	f := NewFactory()
	cfg := f.CreateDefaultConfig().(*Config)
	cfg.SysfsRoot = "testdata/procfs-sys"
	// The effective read timeout is the collection interval at most: at
	// 10 ms a loaded CI machine timed a device's reads out and the first
	// scrape had two of its three devices.
	cfg.CollectionInterval = time.Second
	cfg.InitialDelay = 0
	cfg.HostName = "test-host"
	sink := new(consumertest.MetricsSink)
	r, err := f.CreateMetrics(context.Background(), receivertest.NewNopSettings(metadata.Type), cfg, sink)
	require.NoError(t, err)
	require.NoError(t, r.Start(context.Background(), componenttest.NewNopHost()))
	require.Eventually(t, func() bool { return len(sink.AllMetrics()) >= 2 }, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, r.Shutdown(context.Background()))

	md := sink.AllMetrics()[0]
	assert.Equal(t, 3, md.ResourceMetrics().Len())
	host, ok := md.ResourceMetrics().At(0).Resource().Attributes().Get("host.name")
	require.True(t, ok)
	assert.Equal(t, "test-host", host.Str())
}
