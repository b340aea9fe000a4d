package analysis

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func stragglers(rep Report) []Finding {
	var out []Finding
	for _, f := range rep.Findings {
		if f.Kind == KindStraggler {
			out = append(out, f)
		}
	}
	return out
}

func TestStragglerDetectedDespiteClockSkew(t *testing.T) {
	// Clocks differ by seconds between ranks (synthJob); the lag is 60 ms.
	dumps := synthJob{ranks: 8, colls: 200, straggler: 3, lagMs: 60, jitter: 0.03, seed: 20}.dumps()
	rep := Analyze(dumps, Options{})
	require.Len(t, rep.Findings, 1)
	f := rep.Findings[0]
	assert.Equal(t, KindStraggler, f.Kind)
	assert.Equal(t, []int{3}, f.Ranks)
	assert.Equal(t, int64(200), f.Seq)
	assert.Equal(t, "199", f.Evidence["collectives_scored"])
	assert.Equal(t, "199", f.Evidence["last_and_shortest"])
	assert.InDelta(t, 60, parseMs(t, f.Evidence["mean_enqueue_lag_ms"]), 3)
}

func TestStragglerWithoutDurations(t *testing.T) {
	// TORCH_NCCL_ENABLE_TIMING unset: the watchdog's completion times anchor
	// the offsets, and "last to enqueue" alone decides.
	dumps := synthJob{ranks: 4, colls: 50, straggler: 0, lagMs: 40, jitter: 0.03, seed: 21, noTiming: true}.dumps()
	f := stragglers(Analyze(dumps, Options{}))
	require.Len(t, f, 1)
	assert.Equal(t, []int{0}, f[0].Ranks)
	assert.Equal(t, anchorPrevious, f[0].Evidence["anchor"])
	assert.NotContains(t, f[0].Evidence, "shortest_duration")
	assert.NotContains(t, f[0].Message, "shortest duration")
}

func TestStragglerConstantLagInvisibleWithoutCompletionTimes(t *testing.T) {
	// No duration_ms and no completion times: offsets from each rank's first
	// collective cancel a constant lag. No rank may be named on noise.
	dumps := synthJob{ranks: 4, colls: 50, straggler: 0, lagMs: 40, jitter: 0.03, seed: 22, noTiming: true, noDiscovered: true}.dumps()
	assert.Empty(t, Analyze(dumps, Options{}).Findings)
}

func TestStragglerJitterNeverTriggers(t *testing.T) {
	for seed := range uint64(30) {
		for _, n := range []int{3, 4, 8} {
			dumps := synthJob{ranks: n, colls: 60, straggler: -1, jitter: 0.03, seed: seed}.dumps()
			assert.Empty(t, Analyze(dumps, Options{}).Findings, "seed %d, %d ranks", seed, n)
		}
	}
}

func TestStragglerLagWithinJitterNotReported(t *testing.T) {
	// 3 ms slower with ±6 ms jitter: last more often than the others, but not
	// distinguishable from noise by the lag margin.
	dumps := synthJob{ranks: 4, colls: 400, straggler: 2, lagMs: 3, jitter: 0.03, seed: 23}.dumps()
	assert.Empty(t, stragglers(Analyze(dumps, Options{StragglerMinShare: 0.3})))
}

func TestStragglerOptions(t *testing.T) {
	dumps := synthJob{ranks: 4, colls: 30, straggler: 1, lagMs: 50, jitter: 0.03, seed: 24}.dumps()
	require.Len(t, stragglers(Analyze(dumps, Options{})), 1)
	assert.Empty(t, stragglers(Analyze(dumps, Options{StragglerMinLag: 100 * time.Millisecond})))
	assert.Empty(t, stragglers(Analyze(dumps, Options{StragglerMinCollectives: 40})))
	assert.Empty(t, stragglers(Analyze(dumps, Options{StragglerMinRanks: 5})))
	assert.Empty(t, stragglers(Analyze(dumps, Options{StragglerLagFactor: 100})))
	assert.Empty(t, stragglers(Analyze(dumps[:2], Options{})), "two ranks: one is always last")
}

func TestMedian(t *testing.T) {
	scratch := make([]float64, 4)
	assert.InDelta(t, 2.0, median([]float64{3, 1, 2}, scratch), 0)
	assert.InDelta(t, 2.5, median([]float64{4, 1, 3, 2}, scratch), 0)
	assert.Equal(t, 1, argmax([]float64{1, 5, 5}))
	assert.Equal(t, 0, argmin([]float64{1, 5, 1}))
}
