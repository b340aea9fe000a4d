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
