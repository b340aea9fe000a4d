package stepspanprocessor

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/otelcol-gpu/otelcol-gpu/processor/stepspanprocessor/internal/metadata"
)

// BenchmarkRankSteps pushes rank-step records through the processor, 8
// ranks per batch as one agent's node sends them, and flushes them: ids,
// holding, summarising (no collectives) and sending on. One op is one
// record.
func BenchmarkRankSteps(b *testing.B) {
	cfg := createDefaultConfig().(*Config)
	p, err := newStepSpanProcessor(cfg, processortest.NewNopSettings(metadata.Type), consumertest.NewNop())
	require.NoError(b, err)
	batches := make([]ptrace.Traces, 0, 1024)
	for step := int64(0); step < 1024; step++ {
		td := ptrace.NewTraces()
		for rank := int64(0); rank < 8; rank++ {
			stepTraces("llama-70b", 0, step, rank, "xl003", t0, t0.Add(time.Second)).ResourceSpans().MoveAndAppendTo(td.ResourceSpans())
		}
		batches = append(batches, td)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for n < b.N {
		for _, src := range batches {
			td := ptrace.NewTraces()
			src.CopyTo(td)
			_ = p.ConsumeTraces(ctx, td)
			n += 8
			if n >= b.N {
				break
			}
		}
		p.flush(ctx, true)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkOpenStepMemory reports the heap held per open rank step.
func BenchmarkOpenStepMemory(b *testing.B) {
	cfg := createDefaultConfig().(*Config)
	cfg.CollectiveWait = time.Hour
	cfg.MaxOpenSteps = 1 << 20
	for b.Loop() {
		p, err := newStepSpanProcessor(cfg, processortest.NewNopSettings(metadata.Type), consumertest.NewNop())
		require.NoError(b, err)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		const steps = 10000
		for step := int64(0); step < steps; step++ {
			_ = p.ConsumeTraces(context.Background(), stepTraces("llama-70b", 0, step, 0, "xl003", t0, t0.Add(time.Second)))
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/steps, "B/open-step")
		runtime.KeepAlive(p)
	}
}

// BenchmarkKeptCollectiveMemory reports the heap held per collective kept
// for a rank's steps; a rank holds at most max_collectives_per_rank.
func BenchmarkKeptCollectiveMemory(b *testing.B) {
	cfg := createDefaultConfig().(*Config)
	cfg.MaxCollectivesPerRank = 1 << 20
	for b.Loop() {
		p, err := newStepSpanProcessor(cfg, processortest.NewNopSettings(metadata.Type), consumertest.NewNop())
		require.NoError(b, err)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		const n = 10000
		for i := 0; i < n; i++ {
			_ = p.ConsumeTraces(context.Background(), collectiveTraces("xl003", 3, "nccl:all_reduce", t0.Add(time.Duration(i)*time.Millisecond), time.Millisecond, false))
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "B/collective")
		runtime.KeepAlive(p)
	}
}
