package nodestateprocessor

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/otelcol-gpu/otelcol-gpu/processor/nodestateprocessor/internal/metadata"
)

func TestFactory(t *testing.T) {
	f := NewFactory()
	assert.Equal(t, metadata.Type, f.Type())
	assert.Equal(t, component.StabilityLevelAlpha, f.MetricsStability())
	assert.Equal(t, component.StabilityLevelAlpha, f.LogsStability())
	assert.Equal(t, component.StabilityLevelUndefined, f.TracesStability(), "traces read the extension, they do not feed it")

	h, _ := startedExtension(t)
	set := processortest.NewNopSettings(metadata.Type)
	mp, err := f.CreateMetrics(context.Background(), set, f.CreateDefaultConfig(), consumertest.NewNop())
	require.NoError(t, err)
	lp, err := f.CreateLogs(context.Background(), set, f.CreateDefaultConfig(), consumertest.NewNop())
	require.NoError(t, err)
	for _, p := range []component.Component{mp, lp} {
		require.NoError(t, p.Start(context.Background(), h))
		require.NoError(t, p.Shutdown(context.Background()))
	}
	assert.False(t, mp.Capabilities().MutatesData)
	assert.False(t, lp.Capabilities().MutatesData)
}

func TestFactoryWrongConfig(t *testing.T) {
	set := processortest.NewNopSettings(metadata.Type)
	_, err := createMetrics(context.Background(), set, &struct{}{}, consumertest.NewNop())
	require.ErrorIs(t, err, errConfigNotNodeState)
	_, err = createLogs(context.Background(), set, &struct{}{}, consumertest.NewNop())
	require.ErrorIs(t, err, errConfigNotNodeState)
}
