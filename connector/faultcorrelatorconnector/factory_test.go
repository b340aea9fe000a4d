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
	cfg.(*Config).Mode = ModeGateway // the mode that reads spans
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

// A correlator in agent mode ignores spans: wired into a traces pipeline it
// would drop every span without a word, so creating that path fails with a
// message that names the mode and what to change, while its metrics and logs
// paths (the agent's use) are created as before.
func TestFactoryRefusesTracesInAgentMode(t *testing.T) {
	f := NewFactory()
	cfg := f.CreateDefaultConfig().(*Config)
	require.Equal(t, ModeAgent, cfg.Mode)
	require.NoError(t, cfg.Validate())
	ctx := context.Background()
	sink := new(consumertest.LogsSink)

	_, err := f.CreateTracesToLogs(ctx, testSettings(), cfg, sink)
	require.ErrorIs(t, err, errTracesNeedGateway)
	assert.ErrorContains(t, err, `faultcorrelator: mode "agent" ignores spans`)
	assert.ErrorContains(t, err, "set mode: gateway, or remove the connector from the traces pipeline's exporters")

	me, err := f.CreateMetricsToLogs(ctx, testSettings(), cfg, sink)
	require.NoError(t, err)
	lo, err := f.CreateLogsToLogs(ctx, testSettings(), cfg, sink)
	require.NoError(t, err)
	require.NoError(t, me.Shutdown(ctx))
	require.NoError(t, lo.Shutdown(ctx))

	cfg.Mode = ModeGateway
	tr, err := f.CreateTracesToLogs(ctx, testSettings(), cfg, sink)
	require.NoError(t, err)
	require.NoError(t, tr.Shutdown(ctx))
}
