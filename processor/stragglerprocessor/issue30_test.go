package stragglerprocessor

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// observeLogs replaces the processor's logger with one that keeps what it
// logs.
func (h *harness) observeLogs() *observer.ObservedLogs {
	core, logs := observer.New(zapcore.InfoLevel)
	h.p.logger = zap.New(core)
	return logs
}

// warnings are the WARN entries logged whose message contains substr.
func warnings(logs *observer.ObservedLogs, substr string) []observer.LoggedEntry {
	return logs.FilterLevelExact(zapcore.WarnLevel).FilterMessageSnippet(substr).All()
}

const (
	clockWarning = "node clocks disagree"
	splitWarning = "cannot show a straggler"
)

// skewedJob sends steps of a 32-rank job (4 nodes, xl000..xl003) in one
// labelled stage, whose node 0's clock is behind the others by skew; from
// step onset rank 20 (node 2) computes 2.3x. Every span reports
// comm_wait_ns.
func skewedJob(t *testing.T, h *harness, steps, onset int64, skew time.Duration) {
	for step := range steps {
		start := t0.Add(time.Duration(step) * 3 * time.Second)
		for r := int64(0); r < 32; r++ {
			c := healthyCompute(r)
			if r == 20 && step >= onset {
				c = 2300 * time.Millisecond
			}
			own := start.Add(time.Duration(r%8) * time.Millisecond) // ranks start a few ms apart
			if r/8 == 0 {
				own = own.Add(-skew)
			}
			h.send(t, rank{job: "skewed", step: step, rank: r, worldSize: 32, ppStage: 0,
				start: own, duration: 2500 * time.Millisecond, compute: c, hasCommWait: true, commWait: 10 * time.Millisecond})
		}
	}
}

// Issue 30: node clocks 90 s apart. The straggler's verdict names its own
// start of the onset step on its own node's clock, not the earliest clock
// of the job (node 0's, 90 s behind); the job gets one warning naming the
// nodes and the skew, and is counted once.
func TestFirstSeenIsTheStragglersOwnClock(t *testing.T) {
	const onset = 4
	h := newHarness(t, defaultConfig())
	logs := h.observeLogs()
	skewedJob(t, h, 12, onset, 90*time.Second)

	spans := h.verdictSpans(t)
	require.Contains(t, spans[onset+2], int64(20), "rank 20 opens on its third slow step")
	a := spans[onset+2][20].span.Attributes()
	assert.Equal(t, "straggler.compute", verdict(h.verdicts(t), onset+2, 20))
	assert.Equal(t, int64(onset), intOf(a, "straggler.onset_step"))
	own := t0.Add(onset*3*time.Second + 4*time.Millisecond) // rank 20 is node 2's rank 4
	assert.Equal(t, own.UnixNano(), intOf(a, "straggler.onset_unix_nano"),
		"onset %v off the straggler's own start", time.Duration(intOf(a, "straggler.onset_unix_nano")-own.UnixNano()))
	// a flagged-only span names this step's own start too
	f := spans[onset][20].span.Attributes()
	assert.Equal(t, "flagged", verdict(h.verdicts(t), onset, 20))
	assert.Equal(t, own.UnixNano(), intOf(f, "straggler.onset_unix_nano"))
	// the root still spans every rank: from node 0's (early) clock
	assert.Equal(t, t0.Add(onset*3*time.Second-90*time.Second).UnixNano(), int64(h.roots()[onset].span.StartTimestamp()))

	w := warnings(logs, clockWarning)
	require.Len(t, w, 1, "one warning for the job, however many steps")
	ctx := w[0].ContextMap()
	assert.Equal(t, "skewed", ctx["training.job.id"])
	assert.Equal(t, 90*time.Second, ctx["skew"])
	assert.Equal(t, 30*time.Second, ctx["clock_skew_warning"])
	assert.Equal(t, []any{"xl000 -1m30s"}, ctx["nodes"], "the node off the job's clock, with its offset")
	assert.Equal(t, "xl000", ctx["earliest_node"])
	assert.EqualValues(t, 4, ctx["nodes_compared"])
	assert.EqualValues(t, clockSkewSteps-1, ctx["step"], "after clockSkewSteps decided steps in a row")
	assert.Equal(t, int64(1), h.counter(t, "otelcol_processor_straggler_jobs_clock_skew", ""))
	assert.Empty(t, warnings(logs, splitWarning), "comm_wait_ns splits the wait")
	assert.Zero(t, h.counter(t, "otelcol_processor_straggler_jobs_without_comm_split", ""))
}

// Clocks within the bound (10 s apart against 30 s), or the check turned
// off: no warning, no count; the onset is the rank's own start all the
// same.
func TestClocksWithinTheBoundAreQuiet(t *testing.T) {
	for name, c := range map[string]struct {
		skew  time.Duration
		bound time.Duration
	}{"within": {10 * time.Second, 30 * time.Second}, "off": {90 * time.Second, 0}} {
		t.Run(name, func(t *testing.T) {
			cfg := defaultConfig()
			cfg.ClockSkewWarning = c.bound
			h := newHarness(t, cfg)
			logs := h.observeLogs()
			skewedJob(t, h, 8, 2, c.skew)
			assert.Empty(t, warnings(logs, clockWarning))
			assert.Zero(t, h.counter(t, "otelcol_processor_straggler_jobs_clock_skew", ""))
			a := h.verdictSpans(t)[4][20].span.Attributes()
			assert.Equal(t, t0.Add(2*3*time.Second+4*time.Millisecond).UnixNano(), intOf(a, "straggler.onset_unix_nano"))
		})
	}
}

// One step whose node ends disagree (a node's spans stamped oddly once) is
// not a skewed job: the bound must hold clockSkewSteps steps in a row.
func TestOneOddStepIsNotASkewedJob(t *testing.T) {
	h := newHarness(t, defaultConfig())
	logs := h.observeLogs()
	for step := range int64(12) {
		start := t0.Add(time.Duration(step) * 3 * time.Second)
		for r := int64(0); r < 16; r++ {
			own := start
			if r/8 == 1 && step%3 == 1 { // every third step, never three in a row
				own = own.Add(time.Minute)
			}
			h.send(t, rank{job: "odd", step: step, rank: r, worldSize: 16, ppStage: 0,
				start: own, duration: 2500 * time.Millisecond, compute: healthyCompute(r), hasCommWait: true})
		}
	}
	assert.Empty(t, warnings(logs, clockWarning))
	assert.Len(t, h.roots(), 12)
}

func TestNodeOffsets(t *testing.T) {
	var recs []rankRecord
	add := func(host string, end time.Duration) {
		recs = append(recs, rankRecord{host: host, end: pcommon.NewTimestampFromTime(t0.Add(end))})
	}
	for r := range 4 {
		add("a", time.Duration(r)*time.Millisecond)
		add("b", time.Duration(r)*time.Millisecond)
		add("c", 90*time.Second+time.Duration(r)*time.Millisecond)
	}
	add("a", time.Hour)                        // one odd rank moves nothing: a's median is 2 ms
	add("", time.Hour)                         // no host: left out
	recs = append(recs, rankRecord{host: "d"}) // no end: left out
	var c clockScratch
	// node medians 2 ms, 1.5 ms, 90.0015 s; the job's clock is their median, 2 ms
	want := []nodeOffset{{"b", -500 * time.Microsecond}, {"a", 0}, {"c", 90*time.Second - 500*time.Microsecond}}
	assert.Equal(t, want, c.nodeOffsets(recs))
	assert.Equal(t, want, c.nodeOffsets(recs), "the scratch is reused")
	// one node, or none: nothing to compare
	assert.Nil(t, c.nodeOffsets(recs[:1]))
	assert.Nil(t, c.nodeOffsets(nil))
}

// Issue 30: a job whose records cannot show a straggler (backward includes
// the wait: no comm_wait_ns, no tail_ns) is named once, after
// commSplitSteps decided steps, counted once, and the console's steps say
// so from then on; a record that splits the wait later clears the
// console's note (the warning stays said).
func TestJobWithoutCommSplitIsNamedOnce(t *testing.T) {
	h := newHarness(t, defaultConfig())
	logs := h.observeLogs()
	rc := startWithConsole(t, h)
	send := func(job string, step int64, attrs map[string]any) {
		for r := int64(0); r < 8; r++ {
			h.sendWith(t, rank{job: job, step: step, rank: r, worldSize: 8, ppStage: 0,
				start: t0.Add(time.Duration(step) * time.Second), duration: 800 * time.Millisecond, compute: healthyCompute(r)}, attrs)
		}
	}
	for step := range int64(2 * commSplitSteps) {
		send("blind", step, nil)
		send("tail", step, map[string]any{"nccl.collectives.tail_ns": int64(time.Millisecond)})
	}
	w := warnings(logs, splitWarning)
	require.Len(t, w, 1, "one warning, for the blind job only")
	assert.Equal(t, "blind", w[0].ContextMap()["training.job.id"])
	assert.EqualValues(t, commSplitSteps, w[0].ContextMap()["decided_steps"])
	assert.Equal(t, int64(1), h.counter(t, "otelcol_processor_straggler_jobs_without_comm_split", ""))
	noted := map[string][]int64{}
	for _, s := range rc.recorded() {
		if s.NoCommSplit {
			noted[s.Job] = append(noted[s.Job], s.Step)
		}
	}
	assert.NotContains(t, noted, "tail")
	require.NotEmpty(t, noted["blind"])
	assert.Equal(t, int64(commSplitSteps-1), noted["blind"][0], "from the step that named it")

	// the flight recorder's tail arrives: the job can show a straggler now
	send("blind", 2*commSplitSteps, map[string]any{"nccl.collectives.tail_ns": int64(time.Millisecond)})
	steps := rc.recorded()
	assert.False(t, steps[len(steps)-1].NoCommSplit)
	assert.Len(t, warnings(logs, splitWarning), 1)
}

func TestWaitSplit(t *testing.T) {
	for name, c := range map[string]struct {
		attrs map[string]any
		split bool
	}{
		"comm_wait":               {map[string]any{"training.phase.backward_ns": int64(5), "training.phase.comm_wait_ns": int64(0)}, true},
		"tail":                    {map[string]any{"training.phase.backward_ns": int64(5), "nccl.collectives.tail_ns": int64(1)}, true},
		"backward alone":          {map[string]any{"training.phase.forward_ns": int64(5), "training.phase.backward_ns": int64(5)}, false},
		"backward and total":      {map[string]any{"training.phase.backward_ns": int64(5), "nccl.collectives.total_ns": int64(5)}, false},
		"forward alone":           {map[string]any{"training.phase.forward_ns": int64(5)}, true},
		"no phase, total":         {map[string]any{"nccl.collectives.total_ns": int64(5)}, true},
		"no phase, step duration": {map[string]any{}, false},
	} {
		t.Run(name, func(t *testing.T) {
			span := stepSpan(time.Second, c.attrs)
			assert.Equal(t, c.split, waitSplit(readAttrs(span.Attributes(), pcommon.NewMap())))
		})
	}
}

// A rank whose span has no start takes the step's.
func TestOwnStartFallsBackToTheStep(t *testing.T) {
	st := &openStep{start: 42}
	assert.Equal(t, pcommon.Timestamp(42), ownStart(st, &rankRecord{}))
	assert.Equal(t, pcommon.Timestamp(7), ownStart(st, &rankRecord{start: 7}))
}

// Issue 30, found by the testbed on a busy machine: in a job whose
// backward includes the wait (no comm_wait_ns), the flight recorder's tail
// of two ranks had not arrived when their step spans left the agent. Their
// backward still held the wait for the slowest rank, and beside peers
// whose tail was taken off they looked like compute stragglers. They are
// not judged those steps, and counted; a job none of whose records split
// the wait is judged as it is.
func TestRecordsThatLeftTheWaitInAreNotJudgedBesidePeersThatTookItOut(t *testing.T) {
	const steps, world = 8, 16
	tail := map[string]any{"nccl.collectives.tail_ns": int64(time.Millisecond)}
	run := func(t *testing.T, split func(r int64) bool, extra func(r int64) time.Duration) (*harness, map[int64]map[int64]string) {
		h := newHarness(t, defaultConfig())
		for step := range int64(steps) {
			for r := range int64(world) {
				rk := rank{job: "legacy", step: step, rank: r, worldSize: world, ppStage: 0,
					start: t0.Add(time.Duration(step) * 4 * time.Second), duration: 3 * time.Second, compute: healthyCompute(r) + extra(r)}
				if split(r) {
					h.sendWith(t, rk, tail)
				} else {
					h.sendWith(t, rk, nil)
				}
			}
		}
		return h, h.verdicts(t)
	}
	// the wait for the slowest rank, left in backward by the last two ranks
	waitLeftIn := func(r int64) time.Duration {
		if r >= world-2 {
			return 1500 * time.Millisecond
		}
		return 0
	}

	t.Run("most ranks split the wait", func(t *testing.T) {
		h, v := run(t, func(r int64) bool { return r < world-2 }, waitLeftIn)
		for step := range int64(steps) {
			for r := range int64(world) {
				assert.Equal(t, "none", verdict(v, step, r), "step %d rank %d", step, r)
			}
		}
		assert.Equal(t, int64(2*steps), h.counter(t, "otelcol_processor_straggler_unjudged_spans", reasonWaitNotSplit))
	})
	t.Run("no rank splits it", func(t *testing.T) {
		// the same records without any tail: compared as they are (the job
		// is named as unable to show a straggler, TestJobWithoutCommSplitIsNamedOnce)
		h, v := run(t, func(int64) bool { return false }, waitLeftIn)
		assert.Zero(t, h.counter(t, "otelcol_processor_straggler_unjudged_spans", reasonWaitNotSplit))
		assert.Equal(t, "straggler.compute", verdict(v, steps-1, world-1))
	})
}
