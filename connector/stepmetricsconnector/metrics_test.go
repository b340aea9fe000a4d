package stepmetricsconnector

import (
	"encoding/csv"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/pmetrictest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// goldenInput: job llama-70b, 8 H100 ranks, steps 100-102 of attempt 0
// (rank 5 straggles at step 101) and step 100 replayed by attempt 1; and
// the first three iterations of the Alibaba job (10 workers, V100s: not in
// the peak table, so no MFU) with tokens but no data-load times.
func goldenInput(tb testing.TB) ptrace.Traces {
	td := ptrace.NewTraces()
	for _, run := range []struct {
		attempt int64
		step    int64
		base    time.Duration
	}{{0, 100, 2 * time.Second}, {0, 101, 2 * time.Second}, {0, 102, 2 * time.Second}, {1, 100, 2100 * time.Millisecond}} {
		for rank := int64(0); rank < 8; rank++ {
			dur := run.base + time.Duration(rank)*5*time.Millisecond
			if run.attempt == 0 && run.step == 101 && rank == 5 {
				dur = 2600 * time.Millisecond
			}
			rankStep{job: "llama-70b", attempt: run.attempt, step: run.step, rank: rank, world: 8,
				start: t0.Add(time.Duration(run.step-100) * 3 * time.Second), dur: dur,
				model: "NVIDIA H100 80GB HBM3", tokens: int64(16384),
				dataloadNs: int64(100*time.Millisecond + time.Duration(rank)*10*time.Millisecond), flops: 7.9e14,
			}.appendTo(td)
		}
	}
	alibabaTraces(tb, 3).ResourceSpans().MoveAndAppendTo(td.ResourceSpans())
	return td
}

type alibabaRow struct {
	worker, iteration int64
	batchTime         time.Duration
}

// alibabaRows reads job 1 of the Alibaba trace: batch_time_norm read as
// milliseconds (testdata/SOURCES.txt), in file order.
func alibabaRows(tb testing.TB) []alibabaRow {
	f, err := os.Open(filepath.Join("testdata", "alibaba-mini-batch", "job_1_norm.csv"))
	require.NoError(tb, err)
	defer f.Close()
	records, err := csv.NewReader(f).ReadAll()
	require.NoError(tb, err)
	require.Equal(tb, []string{"", "worker", "gpu", "time", "batch_time_norm"}, records[0])
	var rows []alibabaRow
	for _, rec := range records[1:] {
		worker, err1 := strconv.ParseInt(rec[1], 10, 64)
		iteration, err2 := strconv.ParseInt(rec[3], 10, 64)
		norm, err3 := strconv.ParseInt(rec[4], 10, 64)
		require.NoError(tb, err1)
		require.NoError(tb, err2)
		require.NoError(tb, err3)
		rows = append(rows, alibabaRow{worker: worker, iteration: iteration, batchTime: time.Duration(norm) * time.Millisecond})
	}
	return rows
}

// alibabaTraces is the first n iterations of the Alibaba job as train.step
// spans of job "alibaba-job1", 2,048 tokens per worker, FLOPs on V100s.
func alibabaTraces(tb testing.TB, n int) ptrace.Traces {
	td := ptrace.NewTraces()
	seen := map[int64]bool{}
	for _, row := range alibabaRows(tb) {
		if !seen[row.iteration] && len(seen) == n {
			break
		}
		seen[row.iteration] = true
		rankStep{job: "alibaba-job1", step: row.iteration, rank: row.worker, world: 10,
			start: t0.Add(time.Duration(row.iteration) * time.Second), dur: row.batchTime,
			model: "Tesla V100-SXM2-32GB", tokens: int64(2048), flops: 1e13}.appendTo(td)
	}
	return td
}

func TestGolden(t *testing.T) {
	f := newFixture(t, createDefaultConfig().(*Config))
	f.consume(t, goldenInput(t))
	actual := f.emit(false)
	assertAllFinite(t, actual)

	path := filepath.Join("testdata", "golden", "metrics.yaml")
	if *update {
		require.NoError(t, golden.WriteMetrics(t, path, actual))
	}
	expected, err := golden.ReadMetrics(path)
	require.NoError(t, err)
	require.NoError(t, pmetrictest.CompareMetrics(expected, actual,
		pmetrictest.IgnoreTimestamp(), pmetrictest.IgnoreStartTimestamp()))
	assert.Equal(t, int64(30), f.counter(t, "otelcol_stepmetrics_attributes_skipped", "attribute", "gpu.model", "reason", "unknown"),
		"every V100 record, counted")
}

// One resource per job holding only training.job.id; every point carries
// the job and the attempt; gauges only for intervals in which steps
// closed; nothing for a job attempt without news; the cumulative
// histogram keeps its start time.
func TestShapeOfOutput(t *testing.T) {
	f := newFixture(t, createDefaultConfig().(*Config))
	f.consume(t, goldenInput(t))
	md := f.emit(false)
	require.Equal(t, 2, md.ResourceMetrics().Len())
	for i, job := range []string{"alibaba-job1", "llama-70b"} {
		res := md.ResourceMetrics().At(i).Resource().Attributes()
		assert.Equal(t, map[string]any{"training.job.id": job}, res.AsRaw())
	}
	names := func(md pmetric.Metrics, i int) []string {
		var out []string
		ms := md.ResourceMetrics().At(i).ScopeMetrics().At(0).Metrics()
		for k := 0; k < ms.Len(); k++ {
			out = append(out, ms.At(k).Name())
		}
		return out
	}
	assert.Equal(t, []string{"training.step.duration", "training.tokens.rate"}, names(md, 0), "no data loading, no known GPU")
	assert.Equal(t, []string{"training.step.duration", "training.tokens.rate", "training.dataload.share", "training.mfu"}, names(md, 1))
	hist := md.ResourceMetrics().At(1).ScopeMetrics().At(0).Metrics().At(0).Histogram()
	assert.Equal(t, pmetric.AggregationTemporalityCumulative, hist.AggregationTemporality())
	require.Equal(t, 2, hist.DataPoints().Len(), "attempts 0 and 1")
	for a := 0; a < 2; a++ {
		assert.Equal(t, map[string]any{"training.job.id": "llama-70b", "training.attempt": int64(a)}, hist.DataPoints().At(a).Attributes().AsRaw())
		assert.Equal(t, t0.UnixNano(), int64(hist.DataPoints().At(a).StartTimestamp()))
	}

	f.now = t0.Add(10 * time.Second)
	assert.Zero(t, f.emit(false).DataPointCount(), "no news: nothing")

	// Rank 0 of step 103 arrives: used, but its step is still open.
	f.now = t0.Add(20 * time.Second)
	f.consume(t, traces(rankStep{job: "llama-70b", step: 103, rank: 0, world: 8, start: t0, dur: time.Second}))
	md = f.emit(false)
	require.Equal(t, 1, md.ResourceMetrics().Len())
	assert.Equal(t, []string{"training.step.duration"}, names(md, 0), "no step closed: histogram only")
	dp := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Histogram().DataPoints().At(0)
	assert.Equal(t, uint64(3), dp.Count(), "cumulative")
	assert.Equal(t, t0.UnixNano(), int64(dp.StartTimestamp()))
	assert.Equal(t, f.now.UnixNano(), int64(dp.Timestamp()))
}

// Replaying the whole Alibaba job (10 workers, 300 iterations, worker 6
// turning straggler) gives the histogram and tokens/s computed here
// independently from the CSV.
func TestAlibabaReplay(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	f := newFixture(t, cfg)
	rows := alibabaRows(t)
	require.Len(t, rows, 3000)

	slowest := map[int64]time.Duration{}
	for _, row := range rows {
		if row.batchTime > slowest[row.iteration] {
			slowest[row.iteration] = row.batchTime
		}
	}
	var iterations []int64
	for it := range slowest {
		iterations = append(iterations, it)
	}
	sort.Slice(iterations, func(a, b int) bool { return iterations[a] < iterations[b] })
	require.Len(t, iterations, 300)
	wantCounts := make([]uint64, len(cfg.Buckets)+1)
	var wantSum float64
	for _, it := range iterations {
		secs := slowest[it].Seconds()
		wantSum += secs
		bucket := len(cfg.Buckets)
		for i, bound := range cfg.Buckets {
			if secs <= bound.Seconds() {
				bucket = i
				break
			}
		}
		wantCounts[bucket]++
	}

	// One batch per iteration, as a gateway would receive them.
	for start := 0; start < len(rows); start += 10 {
		td := ptrace.NewTraces()
		for _, row := range rows[start : start+10] {
			rankStep{job: "alibaba-job1", step: row.iteration, rank: row.worker, world: 10, start: t0, dur: row.batchTime,
				tokens: int64(2048)}.appendTo(td)
		}
		f.consume(t, td)
	}
	md := f.emit(false)
	ms := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
	dp := ms.At(0).Histogram().DataPoints().At(0)
	assert.Equal(t, uint64(300), dp.Count())
	assert.InDelta(t, wantSum, dp.Sum(), 1e-9)
	assert.Equal(t, wantCounts, dp.BucketCounts().AsRaw())
	assert.Equal(t, 1.0, dp.Max(), "batch_time_norm peaks at 1000")
	assert.InDelta(t, 300*10*2048/wantSum, ms.At(1).Gauge().DataPoints().At(0).DoubleValue(), 1e-6)
	assert.Equal(t, int64(300), f.counter(t, "otelcol_stepmetrics_steps_closed", "reason", "complete"))
	assert.Zero(t, f.counter(t, "otelcol_stepmetrics_spans_dropped"))
}
