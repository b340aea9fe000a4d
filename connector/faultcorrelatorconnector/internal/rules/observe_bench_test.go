package rules

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// BenchmarkObserve: one sample into an entity's series (the per-signal cost
// of the consume paths).
func BenchmarkObserve(b *testing.B) {
	rs, err := Default()
	require.NoError(b, err)
	ev := NewEvaluator(rs, Limits{})
	at := t0
	b.ReportAllocs()
	for b.Loop() {
		at = at.Add(time.Second)
		ev.Observe(gpuG, sigTemp, 70, at)
	}
}
