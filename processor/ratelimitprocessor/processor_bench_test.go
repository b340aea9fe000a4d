package ratelimitprocessor

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// benchBatch is one batch of the agent's largest size: 64 jobs, spansPerJob
// rank-like spans each (plus extra for job 0), job id on the resource.
func benchBatch(spansPerJob, extraForJob0 int) ptrace.Traces {
	td := ptrace.NewTraces()
	for j := 0; j < 64; j++ {
		n := spansPerJob
		if j == 0 {
			n += extraForJob0
		}
		spans := addJob(td, "job-"+strconv.Itoa(j), n)
		for i := 0; i < spans.Len(); i++ {
			a := spans.At(i).Attributes()
			a.PutInt("training.rank", int64(i))
			a.PutInt("iteration.step", 1000)
			a.PutStr("host.name", "node-"+strconv.Itoa(j))
		}
	}
	return td
}

// BenchmarkTraces: 64 jobs in one batch of 2048 spans. within_budget: every
// span passes (the usual case); runaway: job 0 sends 10x its share and is
// cut to its budget each batch (the batch is copied outside the timer).
func BenchmarkTraces(b *testing.B) {
	b.Run("within_budget", func(b *testing.B) {
		td := benchBatch(32, 0)
		runBenchTraces(b, td, 100_000, 200_000, false)
	})
	b.Run("runaway", func(b *testing.B) {
		td := benchBatch(32, 288) // job 0: 320 spans a batch
		runBenchTraces(b, td, 2000, 40, true)
	})
}

func runBenchTraces(b *testing.B, td ptrace.Traces, rate float64, burst int, copyEach bool) {
	h := newHarness(b)
	cfg := createDefaultConfig().(*Config)
	cfg.Traces.SpansPerSecond, cfg.Traces.Burst = rate, burst
	p, err := newTracesProcessor(cfg, h.set, consumertest.NewNop())
	require.NoError(b, err)
	clk := &fakeClock{t: t0}
	p.lim.now = clk.now
	ctx := context.Background()
	spans := td.SpanCount()
	work := ptrace.NewTraces()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		clk.advance(20 * time.Millisecond) // 50 batches a second
		in := td
		if copyEach {
			b.StopTimer()
			td.CopyTo(work)
			in = work
			b.StartTimer()
		}
		if err := p.ConsumeTraces(ctx, in); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(spans), "spans/op")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(spans), "ns/span")
}
