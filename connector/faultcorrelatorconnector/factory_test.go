package faultcorrelatorconnector

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector"
	"go.opentelemetry.io/collector/consumer/consumertest"

	"github.com/otelcol-gpu/otelcol-gpu/connector/faultcorrelatorconnector/internal/metadata"
)

func testSettings() connector.Settings {
	return connector.Settings{
		ID:                component.NewID(metadata.Type),
		TelemetrySettings: componenttest.NewNopTelemetrySettings(),
		BuildInfo:         component.NewDefaultBuildInfo(),
	}
}

func TestFactorySharesOneCorrelatorPerConfig(t *testing.T) {
	f := NewFactory()
	assert.Equal(t, metadata.Type, f.Type())
	cfg := f.CreateDefaultConfig()
	sink := new(consumertest.LogsSink)
	ctx := context.Background()

	tr, err := f.CreateTracesToLogs(ctx, testSettings(), cfg, sink)
	require.NoError(t, err)
	me, err := f.CreateMetricsToLogs(ctx, testSettings(), cfg, sink)
	require.NoError(t, err)
	lo, err := f.CreateLogsToLogs(ctx, testSettings(), cfg, sink)
	require.NoError(t, err)
	assert.Same(t, tr.(shared).Inner, me.(shared).Inner)
	assert.Same(t, me.(shared).Inner, lo.(shared).Inner)
	assert.False(t, lo.Capabilities().MutatesData, "reads only: the gateway shares batches with the backends' pipelines")

	host := componenttest.NewNopHost()
	for _, c := range []component.Component{tr, me, lo} {
		require.NoError(t, c.Start(ctx, host))
	}
	for _, c := range []component.Component{tr, me, lo} {
		require.NoError(t, c.Shutdown(ctx))
	}

	// A new config gets a new instance.
	other, err := f.CreateLogsToLogs(ctx, testSettings(), f.CreateDefaultConfig(), sink)
	require.NoError(t, err)
	assert.NotSame(t, lo.(shared).Inner, other.(shared).Inner)
	require.NoError(t, other.Shutdown(ctx))
}

func TestFactoryRejectsForeignConfig(t *testing.T) {
	f := NewFactory()
	type otherConfig struct{}
	_, err := f.CreateLogsToLogs(context.Background(), testSettings(), &otherConfig{}, new(consumertest.LogsSink))
	require.ErrorIs(t, err, errConfigNotFaultCorrelator)
}
