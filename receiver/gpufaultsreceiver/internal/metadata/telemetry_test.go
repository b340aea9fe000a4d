package metadata

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

func TestTelemetryBuilder(t *testing.T) {
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) })

	tb, err := NewTelemetryBuilder(tt.NewTelemetrySettings())
	require.NoError(t, err)
	defer tb.Shutdown()

	tb.GpuFaultsPartitionsOwned.Record(context.Background(), 3)
	tb.GpuFaultsPartitionsOwned.Record(context.Background(), 0)
	tb.GpuFaultsRecordsDelivered.Add(context.Background(), 2)

	m, err := tt.GetMetric("otelcol_gpu_faults_partitions_owned")
	require.NoError(t, err)
	gauge, ok := m.Data.(metricdata.Gauge[int64])
	require.True(t, ok, "partitions owned is a gauge: %T", m.Data)
	require.Len(t, gauge.DataPoints, 1)
	assert.Equal(t, int64(0), gauge.DataPoints[0].Value, "the last value, not a sum")

	m, err = tt.GetMetric("otelcol_gpu_faults_records_delivered")
	require.NoError(t, err)
	sum, ok := m.Data.(metricdata.Sum[int64])
	require.True(t, ok)
	assert.Equal(t, int64(2), sum.DataPoints[0].Value)
}
