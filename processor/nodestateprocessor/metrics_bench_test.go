package nodestateprocessor

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// BenchmarkRecordEightGPUBatch: one scrape of an 8-GPU node (the L4
// golden's metrics plus SM active, 9 clock-event reasons, NVLink and ECC
// counters, per GPU) through the processor into a real extension whose
// series are full, as after the first 10 minutes.
func BenchmarkRecordEightGPUBatch(b *testing.B) {
	const batches = 256
	p, _ := startedMetrics(b, new(consumertest.MetricsSink))
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	values := make([]gpuValues, 8)
	for i := range values {
		values[i] = steadyGPU(i)
	}
	mds := make([]pmetric.Metrics, batches)
	for i := range mds {
		values[i%8].nvlink["crc_flit"]++
		mds[i] = eightGPUBatch(b, t0.Add(time.Duration(i)*time.Second), values)
	}
	// Fill the series to max_samples_per_series (600 one-second scrapes).
	shift := func(d time.Duration) {
		for _, md := range mds {
			eachPoint(md, func(_ pmetric.Metric, dp pmetric.NumberDataPoint) {
				dp.SetTimestamp(pcommon.NewTimestampFromTime(dp.Timestamp().AsTime().Add(d)))
			})
		}
	}
	ctx := context.Background()
	for range 3 {
		for _, md := range mds {
			require.NoError(b, p.ConsumeMetrics(ctx, md))
		}
		shift(batches * time.Second)
	}
	points := mds[0].DataPointCount()

	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i > 0 && i%batches == 0 {
			b.StopTimer()
			shift(batches * time.Second) // later scrapes, never the same times again
			b.StartTimer()
		}
		if err := p.ConsumeMetrics(ctx, mds[i%batches]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(points), "points/batch")
}
