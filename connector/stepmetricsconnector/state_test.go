package stepmetricsconnector

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ranks returns the records of ranks 0..n-1 of a step, rank r taking
// dur(r).
func ranks(job string, attempt, step, world int64, n int, dur func(rank int64) time.Duration) []rankStep {
	var out []rankStep
	for r := int64(0); r < int64(n); r++ {
		out = append(out, rankStep{job: job, attempt: attempt, step: step, rank: r, world: world, start: t0, dur: dur(r),
			model: "NVIDIA H100 80GB HBM3", tokens: int64(1000), dataloadNs: int64(dur(r) / 10), flops: 4e14})
	}
	return out
}

func seconds(s float64) func(int64) time.Duration {
	return func(int64) time.Duration { return time.Duration(s * float64(time.Second)) }
}

func histogramOf(t *testing.T, f *fixture, job string, attempt int64) *histogram {
	t.Helper()
	j := f.c.jobs[jobKey{job: job, attempt: attempt}]
	require.NotNil(t, j, "state of %s/%d", job, attempt)
	return &j.hist
}

func TestStepClosesWhenAllRanksArrived(t *testing.T) {
	f := newFixture(t, createDefaultConfig().(*Config))
	steps := ranks("j", 0, 1, 8, 8, func(r int64) time.Duration { return time.Second + time.Duration(r)*time.Millisecond })
	f.consume(t, traces(steps[:7]...))
	assert.Zero(t, histogramOf(t, f, "j", 0).count, "7 of 8 ranks: still open")
	f.consume(t, traces(steps[7]))
	h := histogramOf(t, f, "j", 0)
	assert.Equal(t, uint64(1), h.count)
	assert.InDelta(t, 1.007, h.sum, 1e-12, "the step lasts as long as its slowest rank")
	assert.Empty(t, f.c.jobs[jobKey{job: "j"}].open)
}

func TestStepClosesAfterTimeout(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	f := newFixture(t, cfg)
	f.consume(t, traces(ranks("j", 0, 1, 8, 6, seconds(2))...))
	f.now = t0.Add(cfg.StepTimeout - time.Second)
	assert.Zero(t, f.emit(false).DataPointCount(), "nothing closed yet")
	f.now = t0.Add(cfg.StepTimeout)
	md := f.emit(false)
	assert.Equal(t, 4, md.DataPointCount(), "histogram, tokens rate, data-load share, MFU")
	assert.Equal(t, int64(1), f.counter(t, "otelcol_stepmetrics_steps_closed", "reason", "timeout"))
	w := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(1).Gauge().DataPoints().At(0)
	assert.InDelta(t, 6*1000/2.0, w.DoubleValue(), 1e-9, "the 6 ranks seen")
}

// Ranks arrive out of order and steps interleave; a step already closed
// does not reopen.
func TestLateAndOutOfOrder(t *testing.T) {
	f := newFixture(t, createDefaultConfig().(*Config))
	s10 := ranks("j", 0, 1000, 4, 4, seconds(1))
	s11 := ranks("j", 0, 1001, 4, 4, seconds(1.5))
	f.consume(t, traces(s11[3], s10[2], s11[0], s10[0], s11[2], s11[1])) // 1001 complete, 1000 half
	h := histogramOf(t, f, "j", 0)
	assert.Equal(t, uint64(1), h.count)
	f.consume(t, traces(s10[3], s10[1])) // 1000 completes after 1001: not late
	assert.Equal(t, uint64(2), h.count)
	assert.InDelta(t, 2.5, h.sum, 1e-12)

	f.consume(t, traces(s10[1])) // closed: late
	// Step 999 closes after 1000 and 1001 did: not late either.
	f.consume(t, traces(ranks("j", 0, 999, 1, 1, seconds(1))...))
	assert.Equal(t, uint64(3), h.count)
	// Older than the remembered window: late.
	f.consume(t, traces(ranks("j", 0, 1001-closedWindow, 1, 1, seconds(1))...))
	f.emit(false)
	assert.Equal(t, int64(2), f.counter(t, "otelcol_stepmetrics_spans_dropped", "reason", "late"))
	assert.Equal(t, uint64(3), h.count)
}

func TestClosedSteps(t *testing.T) {
	c := closedSteps{newest: -1}
	assert.False(t, c.has(0))
	c.add(5)
	assert.True(t, c.has(5))
	assert.False(t, c.has(4), "never closed, within the window")
	c.add(4)
	assert.True(t, c.has(4))
	c.add(5 + closedWindow - 1)
	assert.True(t, c.has(5), "still in the window")
	assert.True(t, c.has(4), "out of the window: too old to tell, late")
	assert.False(t, c.has(6), "a bit reused for a newer step was cleared")
	c.add(10_000)
	assert.False(t, c.has(9_999))
	assert.True(t, c.has(10_000))
	assert.True(t, c.has(10_000-closedWindow))

	c.add(math.MaxInt64 - 1)
	c.add(math.MaxInt64) // must not loop forever on overflow
	assert.True(t, c.has(math.MaxInt64))
	assert.True(t, c.has(math.MaxInt64-1))
	assert.False(t, c.has(math.MaxInt64-2))
}

// A restarted job (attempt 1) replays steps of attempt 0 without colliding.
func TestAttemptsKeptApart(t *testing.T) {
	f := newFixture(t, createDefaultConfig().(*Config))
	f.consume(t, traces(ranks("j", 0, 5, 2, 2, seconds(1))...))
	f.consume(t, traces(ranks("j", 1, 5, 2, 2, seconds(3))...))
	f.consume(t, traces(ranks("j", 1, 4, 2, 2, seconds(3))...))
	assert.Equal(t, uint64(1), histogramOf(t, f, "j", 0).count)
	assert.Equal(t, uint64(2), histogramOf(t, f, "j", 1).count)
	f.emit(false)
	assert.Zero(t, f.counter(t, "otelcol_stepmetrics_spans_dropped"))
}

func TestMaxOpenSteps(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.MaxOpenSteps = 2
	f := newFixture(t, cfg)
	f.consume(t, traces(ranks("j", 0, 5, 4, 1, seconds(1))...))
	f.consume(t, traces(ranks("j", 0, 6, 4, 1, seconds(1))...))
	f.consume(t, traces(ranks("j", 0, 4, 4, 1, seconds(1))...)) // older than all open ones
	assert.Zero(t, histogramOf(t, f, "j", 0).count)
	f.consume(t, traces(ranks("j", 0, 7, 4, 1, seconds(1))...)) // evicts step 5
	assert.Equal(t, uint64(1), histogramOf(t, f, "j", 0).count)
	assert.Len(t, f.c.jobs[jobKey{job: "j"}].open, 2)
	f.emit(false)
	assert.Equal(t, int64(1), f.counter(t, "otelcol_stepmetrics_spans_dropped", "reason", "too_many_open_steps"))
	assert.Equal(t, int64(1), f.counter(t, "otelcol_stepmetrics_steps_closed", "reason", "evicted"))
}

// A job sending a step number that never repeats keeps memory bounded.
func TestNeverRepeatingStepsBounded(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	f := newFixture(t, cfg)
	for step := int64(0); step < 10_000; step++ {
		f.consume(t, traces(rankStep{job: "j", step: step, rank: 3, world: 16384, start: t0, dur: time.Second}))
	}
	assert.LessOrEqual(t, len(f.c.jobs[jobKey{job: "j"}].open), cfg.MaxOpenSteps)
}

func TestMaxJobsAndExpiry(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.MaxJobs = 2
	f := newFixture(t, cfg)
	f.consume(t, traces(ranks("a", 0, 1, 1, 1, seconds(1))...))
	f.consume(t, traces(ranks("b", 0, 1, 1, 1, seconds(1))...))
	f.consume(t, traces(ranks("c", 0, 1, 1, 1, seconds(1))...))
	assert.Len(t, f.c.jobs, 2)
	f.emit(false)
	assert.Equal(t, int64(1), f.counter(t, "otelcol_stepmetrics_spans_dropped", "reason", "too_many_jobs"))

	// b stays active; a, silent, expires.
	f.now = t0.Add(cfg.JobExpiry - time.Minute)
	f.consume(t, traces(ranks("b", 0, 2, 1, 1, seconds(1))...))
	f.now = t0.Add(cfg.JobExpiry)
	md := f.emit(false)
	require.Equal(t, 1, md.ResourceMetrics().Len())
	assert.Equal(t, map[string]any{"training.job.id": "b"}, md.ResourceMetrics().At(0).Resource().Attributes().AsRaw())
	assert.Len(t, f.c.jobs, 1)
	assert.Contains(t, f.c.jobs, jobKey{job: "b"})
	f.consume(t, traces(ranks("c", 0, 1, 1, 1, seconds(1))...))
	assert.Len(t, f.c.jobs, 2, "room for c now")
	assert.Equal(t, f.now, f.c.jobs[jobKey{job: "c"}].start, "a new cumulative series starts now")
}

// A job attempt whose steps stay open is not forgotten until they close.
func TestExpiryWaitsForOpenSteps(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.StepTimeout = time.Hour
	cfg.JobExpiry = time.Minute
	f := newFixture(t, cfg)
	f.consume(t, traces(ranks("a", 0, 1, 2, 1, seconds(1))...))
	f.now = t0.Add(2 * time.Minute)
	f.emit(false)
	assert.Len(t, f.c.jobs, 1)
	f.now = t0.Add(time.Hour)
	assert.Equal(t, 4, f.emit(false).DataPointCount())
	assert.Empty(t, f.c.jobs)
}

func TestHistogramBuckets(t *testing.T) {
	bounds := []float64{0.1, 1, 60}
	h := histogram{counts: make([]uint64, 4)}
	for _, v := range []float64{0.05, 0.1, 0.5, 1, 1.0001, 59, 60, 61, 3600} {
		h.record(v, bounds)
	}
	// (-inf,0.1] (0.1,1] (1,60] (60,+inf)
	assert.Equal(t, []uint64{2, 2, 3, 2}, h.counts)
	assert.Equal(t, uint64(9), h.count)
	assert.Equal(t, 0.05, h.min)
	assert.Equal(t, 3600.0, h.max)
	assert.InDelta(t, 0.05+0.1+0.5+1+1.0001+59+60+61+3600, h.sum, 1e-9)
}

func TestRankSet(t *testing.T) {
	var s rankSet
	assert.True(t, s.add(0))
	assert.False(t, s.add(0))
	assert.True(t, s.add(65535))
	assert.True(t, s.add(63))
	assert.True(t, s.add(64))
	assert.False(t, s.add(65535))
	assert.Len(t, s, 1024, "65,536 ranks in 8 KiB")
	s.grow(10)
	assert.Len(t, s, 1024, "never shrinks")
}

// The formulas of README.md, on numbers worked out by hand.
func TestWindowFormulas(t *testing.T) {
	f := newFixture(t, createDefaultConfig().(*Config))
	// Step 1: ranks of 1 s and 2 s, 100 tokens each, data loading 0.1 s
	// and 0.6 s; an H100 rank with 5e14 FLOPs and an A100 rank with 1e14.
	td := traces(
		rankStep{job: "j", step: 1, rank: 0, world: 2, start: t0, dur: time.Second, tokens: int64(100), dataloadNs: int64(1e8),
			model: "NVIDIA H100 80GB HBM3", flops: 5e14},
		rankStep{job: "j", step: 1, rank: 1, world: 2, start: t0, dur: 2 * time.Second, tokens: 100.0, dataloadNs: 6e8,
			model: "NVIDIA A100-SXM4-80GB", flops: 1e14},
		// Step 2: one rank reports tokens (300), 3 s; no data loading; no FLOPs.
		rankStep{job: "j", step: 2, rank: 0, world: 2, start: t0, dur: 3 * time.Second, tokens: int64(300)},
		rankStep{job: "j", step: 2, rank: 1, world: 2, start: t0, dur: time.Second},
	)
	f.consume(t, td)
	j := f.c.jobs[jobKey{job: "j"}]
	rate, ok := j.win.tokensRate()
	require.True(t, ok)
	assert.InDelta(t, (200.0+300.0)/(2.0+3.0), rate, 1e-12, "Σ tokens / Σ longest rank duration")
	share, ok := j.win.dataloadShare()
	require.True(t, ok)
	assert.InDelta(t, (0.1/1+0.6/2)/2, share, 1e-12, "step 1 only: mean of the ranks' shares")
	mfu, ok := j.win.mfu()
	require.True(t, ok)
	assert.InDelta(t, (5e14+1e14)/(2.0*(989.4e12+312e12)), mfu, 1e-12, "step 1 only: Σ FLOPs / (step duration × Σ peaks)")
}

func TestFiniteRatio(t *testing.T) {
	for _, tc := range []struct {
		num, den float64
		ok       bool
	}{
		{1, 2, true}, {0, 2, true}, {1, 0, false}, {1, -1, false}, {1, math.NaN(), false},
		{math.MaxFloat64, 1e-300, false}, {math.Inf(1), 1, false},
	} {
		v, ok := finiteRatio(tc.num, tc.den)
		assert.Equal(t, tc.ok, ok, "%g/%g", tc.num, tc.den)
		if ok {
			assert.Equal(t, tc.num/tc.den, v)
		}
	}
}
