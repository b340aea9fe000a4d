package stragglerprocessor

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/otelcol-gpu/otelcol-gpu/processor/stragglerprocessor/internal/metadata"
)

func TestFactory(t *testing.T) {
	f := NewFactory()
	assert.Equal(t, metadata.Type, f.Type())
	assert.Equal(t, metadata.TracesStability, f.TracesStability())
	p, err := f.CreateTraces(context.Background(), processortest.NewNopSettings(metadata.Type), f.CreateDefaultConfig(), consumertest.NewNop())
	require.NoError(t, err)
	assert.True(t, p.Capabilities().MutatesData)
	require.NoError(t, p.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, p.Shutdown(context.Background()))
}

func TestFactoryRefusesOtherConfig(t *testing.T) {
	_, err := createTraces(context.Background(), processortest.NewNopSettings(metadata.Type), struct{}{}, consumertest.NewNop())
	assert.ErrorIs(t, err, errConfigNotStraggler)
}
