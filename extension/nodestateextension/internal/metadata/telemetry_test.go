package metadata

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

func TestTelemetryBuilder(t *testing.T) {
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) })

	tb, err := NewTelemetryBuilder(tt.NewTelemetrySettings())
	require.NoError(t, err)
	defer tb.Shutdown()

	attrs := metric.WithAttributeSet(attribute.NewSet(
		attribute.String(TelemetryAttrKind, "gpu"),
		attribute.String(TelemetryAttrReason, "capacity"),
	))
	tb.NodestateEvictions.Add(context.Background(), 2, attrs)
	tb.NodestateEvictions.Add(context.Background(), 1, attrs)

	m, err := tt.GetMetric("otelcol_nodestate_evictions")
	require.NoError(t, err)
	assert.Equal(t, "{entry}", m.Unit)
	sum, ok := m.Data.(metricdata.Sum[int64])
	require.True(t, ok)
	require.Len(t, sum.DataPoints, 1)
	assert.Equal(t, int64(3), sum.DataPoints[0].Value)
	v, ok := sum.DataPoints[0].Attributes.Value(TelemetryAttrKind)
	require.True(t, ok)
	assert.Equal(t, "gpu", v.AsString())
}
