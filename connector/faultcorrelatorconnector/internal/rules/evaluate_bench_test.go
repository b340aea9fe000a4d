package rules

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

// BenchmarkEvaluate10kEntities: the default rules over 10,000 GPUs, each
// with five signals scraped every 10 s for 5 minutes (30 samples each), none
// of them faulty: the cost of one evaluation_interval tick.
func BenchmarkEvaluate10kEntities(b *testing.B) {
	rs, err := Default()
	require.NoError(b, err)
	ev := NewEvaluator(rs, Limits{})
	signals := []string{sigDBE, sigSBE, sigCRC, sigTemp, sigThrot}
	for g := 0; g < 10_000; g++ {
		e := fault.Entity{Kind: fault.EntityGPU, Key: "GPU-" + strconv.Itoa(g)}
		for i := 0; i < 30; i++ {
			at := t0.Add(time.Duration(i) * 10 * time.Second)
			for _, s := range signals {
				v := 0.0
				if s == sigTemp {
					v = 70
				}
				ev.Observe(e, s, v, at)
			}
		}
	}
	now := t0.Add(300 * time.Second)
	require.Empty(b, ev.Evaluate(now))
	require.Equal(b, 10_000, ev.Entities())
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		ev.Evaluate(now)
	}
}

// BenchmarkEvaluateChanged10kEntities: the same 10,000 GPUs each with one
// new sample since the last evaluation, then EvaluateChanged: the gateway's
// tick when every GPU reported once (issue 32).
func BenchmarkEvaluateChanged10kEntities(b *testing.B) {
	rs, err := Default()
	require.NoError(b, err)
	ev := NewEvaluator(rs, Limits{})
	ents := make([]fault.Entity, 10_000)
	for g := range ents {
		ents[g] = fault.Entity{Kind: fault.EntityGPU, Key: "GPU-" + strconv.Itoa(g)}
		for i := 0; i < 30; i++ {
			ev.Observe(ents[g], sigTemp, 70, t0.Add(time.Duration(i)*10*time.Second))
		}
	}
	now := t0.Add(300 * time.Second)
	require.Empty(b, ev.Evaluate(now))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		for _, e := range ents {
			ev.Observe(e, sigTemp, 70, now)
		}
		b.StartTimer()
		if m := ev.EvaluateChanged(now); len(m) != 0 {
			b.Fatalf("%d matches from healthy data", len(m))
		}
	}
}
