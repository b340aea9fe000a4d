package gpufaultsreceiver

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpufaultsreceiver/internal/metadata"
)

func TestFactory(t *testing.T) {
	f := NewFactory()
	assert.Equal(t, metadata.Type, f.Type())
	assert.Equal(t, component.StabilityLevelAlpha, f.LogsStability())
	cfg := f.CreateDefaultConfig().(*Config)
	cfg.Brokers = newCluster(t)
	r, err := f.CreateLogs(context.Background(), receivertest.NewNopSettings(metadata.Type), cfg, consumertest.NewNop())
	require.NoError(t, err)
	require.NoError(t, r.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, r.Shutdown(context.Background()))
}

// Shutdown without Start (the collector does this when another component
// fails to start) returns at once.
func TestShutdownWithoutStart(t *testing.T) {
	r, err := NewFactory().CreateLogs(context.Background(), receivertest.NewNopSettings(metadata.Type),
		createDefaultConfig(), consumertest.NewNop())
	require.NoError(t, err)
	require.NoError(t, r.Shutdown(context.Background()))
}

func TestFactoryWrongConfig(t *testing.T) {
	_, err := createLogsReceiver(context.Background(), receivertest.NewNopSettings(metadata.Type), &struct{}{}, consumertest.NewNop())
	require.ErrorIs(t, err, errConfigNotGPUFaults)
}
