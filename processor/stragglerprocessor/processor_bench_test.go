package stragglerprocessor

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// benchSpans pushes rank step spans through the processor in batches of
// 64 ranks (one step of a 64-rank job per batch, decided by world_size):
// gathering, DecideStep, persistence, annotation and the root span. One op
// is one rank span.
func benchSpans(b *testing.B, ranks int64) {
	h := newHarnessTo(b, defaultConfig(), consumertest.NewNop())
	const steps = 64
	batches := make([]ptrace.Traces, 0, steps)
	for step := int64(0); step < steps; step++ {
		td := ptrace.NewTraces()
		for r := int64(0); r < ranks; r++ {
			rank{job: "llama-70b", step: step, rank: r, worldSize: ranks, ppStage: r * 4 / ranks, start: t0, duration: 2 * time.Second,
				compute: healthyCompute(r % 64), wait: time.Second}.appendTo(td)
		}
		batches = append(batches, td)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for step := int64(0); n < b.N; step++ {
		td := ptrace.NewTraces()
		batches[step%steps].CopyTo(td)
		// new step numbers each round, so no span is late
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			td.ResourceSpans().At(i).ScopeSpans().At(0).Spans().At(0).Attributes().PutInt("iteration.step", step)
		}
		_ = h.p.ConsumeTraces(ctx, td)
		n += int(ranks)
	}
	b.StopTimer()
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "spans/s")
}

func BenchmarkSpans64Ranks(b *testing.B)   { benchSpans(b, 64) }
func BenchmarkSpans4096Ranks(b *testing.B) { benchSpans(b, 4096) }
