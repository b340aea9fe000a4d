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
		attribute.String(TelemetryAttrRoute, "/api/v1/status"),
		attribute.Int(TelemetryAttrCode, 200),
	))
	tb.FaultconsoleRequests.Add(context.Background(), 2, attrs)
	tb.FaultconsoleRequests.Add(context.Background(), 1, attrs)
	tb.FaultconsoleUnauthorizedRequests.Add(context.Background(), 1)

	m, err := tt.GetMetric("otelcol_faultconsole_requests")
	require.NoError(t, err)
	assert.Equal(t, "{request}", m.Unit)
	sum, ok := m.Data.(metricdata.Sum[int64])
	require.True(t, ok)
	require.Len(t, sum.DataPoints, 1)
	assert.Equal(t, int64(3), sum.DataPoints[0].Value)
	v, ok := sum.DataPoints[0].Attributes.Value(TelemetryAttrCode)
	require.True(t, ok)
	assert.Equal(t, int64(200), v.AsInt64())

	m, err = tt.GetMetric("otelcol_faultconsole_unauthorized_requests")
	require.NoError(t, err)
	sum, ok = m.Data.(metricdata.Sum[int64])
	require.True(t, ok)
	require.Len(t, sum.DataPoints, 1)
	assert.Equal(t, int64(1), sum.DataPoints[0].Value)
}
