package stepmetricsconnector

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer/consumertest"

	"github.com/otelcol-gpu/otelcol-gpu/connector/stepmetricsconnector/internal/metadata"
)

func TestFactory(t *testing.T) {
	f := NewFactory()
	assert.Equal(t, metadata.Type, f.Type())
	assert.Equal(t, component.StabilityLevelDevelopment, f.TracesToMetricsStability())
	require.NoError(t, f.CreateDefaultConfig().(*Config).Validate())

	set := connectortest.NewNopSettings(metadata.Type)
	c, err := f.CreateTracesToMetrics(context.Background(), set, f.CreateDefaultConfig(), consumertest.NewNop())
	require.NoError(t, err)
	require.NoError(t, c.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, c.Shutdown(context.Background()))

	_, err = f.CreateTracesToLogs(context.Background(), set, f.CreateDefaultConfig(), consumertest.NewNop())
	assert.Error(t, err, "only traces → metrics is offered")
}

// The default buckets are not shared between configs: changing one
// config's must not change another's.
func TestDefaultBucketsNotShared(t *testing.T) {
	a := createDefaultConfig().(*Config)
	a.Buckets[0] = 0
	assert.Equal(t, defaultBuckets[0], createDefaultConfig().(*Config).Buckets[0])
}

func TestFactoryRejectsOtherConfig(t *testing.T) {
	type other struct{}
	_, err := createTracesToMetrics(context.Background(), connectortest.NewNopSettings(metadata.Type), &other{}, consumertest.NewNop())
	assert.ErrorContains(t, err, "stepmetricsconnector: creating the connector")
}
