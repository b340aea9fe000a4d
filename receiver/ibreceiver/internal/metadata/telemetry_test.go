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
		attribute.String(TelemetryAttrDevice, "mlx5_0"),
		attribute.String(TelemetryAttrCounter, "ports/1/counters/symbol_error"),
	))
	tb.IbReadErrors.Add(context.Background(), 2, attrs)
	tb.IbReadErrors.Add(context.Background(), 1, attrs)

	m, err := tt.GetMetric("otelcol_ib_read_errors")
	require.NoError(t, err)
	assert.Equal(t, "{error}", m.Unit)
	sum, ok := m.Data.(metricdata.Sum[int64])
	require.True(t, ok)
	require.Len(t, sum.DataPoints, 1)
	assert.Equal(t, int64(3), sum.DataPoints[0].Value)
	v, ok := sum.DataPoints[0].Attributes.Value(TelemetryAttrDevice)
	require.True(t, ok)
	assert.Equal(t, "mlx5_0", v.AsString())
}
