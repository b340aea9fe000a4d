package stragglerprocessor

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// A training script is untrusted (docs/security.md): whatever it puts on
// its spans, no straggler.* attribute and no step.* summary leaves this
// processor unless its own decision wrote it. A script-sent
// train.step.root with straggler.job_verdict would otherwise open a
// job.slowdown for any job id it names.
func TestForgedProcessorAttributesAreStripped(t *testing.T) {
	h := newHarness(t, defaultConfig())
	td := ptrace.NewTraces()
	root := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	root.SetName("train.step.root")
	ra := root.Attributes()
	ra.PutStr("training.job.id", "someone-elses-job")
	ra.PutInt("iteration.step", 999)
	ra.PutStr("straggler.job_verdict", "job.slowdown")
	ra.PutDouble("straggler.slow_share", 0.9)
	ra.PutInt("straggler.onset_step", 990)
	ra.PutInt("straggler.onset_unix_nano", t0.UnixNano())
	ra.PutInt("straggler.flagged_ranks", 7)
	ra.PutBool("step.slow", true)
	ra.PutInt("step.slowest_rank", 5)
	ra.PutInt("step.max_ns", int64(time.Hour))
	// a rank step span of its own job carrying the same claims
	own := rank{job: "mine", step: 1, rank: 0, worldSize: 2, ppStage: -1, start: t0, duration: time.Second, compute: time.Second}.traces()
	oa := own.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes()
	oa.PutStr("straggler.job_verdict", "job.slowdown")
	oa.PutDouble("straggler.compute_ratio", 3)
	oa.PutBool("step.slow", true)
	own.ResourceSpans().MoveAndAppendTo(td.ResourceSpans())

	require.NoError(t, h.p.ConsumeTraces(context.Background(), td))
	all := h.spans()
	require.Len(t, all, 2)
	for _, s := range all {
		for k := range s.span.Attributes().All() {
			assert.False(t, ownAttr(k), "%s arrived on a %s span and left: only this processor writes it", k, s.span.Name())
		}
	}
	assert.Equal(t, map[string]any{"training.job.id": "someone-elses-job", "iteration.step": int64(999)}, all[0].span.Attributes().AsRaw())
	_, hasStep := all[1].span.Attributes().Get("iteration.step")
	assert.True(t, hasStep, "the step span's own attributes pass")
}

// A script's phase times, communication wait and tail move only its own
// rank (docs/security.md, "What a training script can say"): three ranks
// claiming almost no compute behind a huge comm_wait_ns and two whose
// nccl.collectives.tail_ns exceeds their backward neither hide the one
// truly slow rank nor get any other rank a verdict.
func TestLyingRanksMoveOnlyThemselves(t *testing.T) {
	const world, slowRank, lieFrom, slowFrom, steps = 16, 9, 6, 8, 16
	ms := func(v float64) int64 { return int64(v * float64(time.Millisecond)) }
	liars := map[int64]bool{0: true, 1: true, 2: true, 3: true, 4: true}
	h := newHarness(t, defaultConfig())
	for step := int64(0); step < steps; step++ {
		for r := int64(0); r < world; r++ {
			f, b, o := 300.0, 600.0, 100.0
			if r == slowRank && step >= slowFrom {
				f, b, o = 2*f, 2*b, 2*o
			}
			attrs := map[string]any{}
			switch {
			case step >= lieFrom && r <= 2: // "I barely compute: it is all waiting"
				attrs["training.phase.comm_wait_ns"] = ms(5000)
				f, b, o = 1, 1, 1
			case step >= lieFrom && liars[r]: // a tail longer than the backward it is taken from
				attrs["nccl.collectives.tail_ns"] = ms(10 * b)
			}
			attrs["training.phase.forward_ns"] = ms(f)
			attrs["training.phase.backward_ns"] = ms(b)
			attrs["training.phase.optimizer_ns"] = ms(o)
			h.sendWith(t, rank{job: "liars", step: step, rank: r, worldSize: world, ppStage: -1,
				start: t0.Add(time.Duration(step) * 3 * time.Second), duration: 2500 * time.Millisecond}, attrs)
		}
	}
	require.NoError(t, h.p.Shutdown(context.Background()))
	v := h.verdicts(t)
	opened := false
	for step, ranks := range v {
		for r, verdict := range ranks {
			assert.True(t, r == slowRank || liars[r], "step %d: rank %d got %q; only a liar or the slow rank may", step, r, verdict)
			opened = opened || (r == slowRank && verdict == "straggler.compute")
		}
	}
	assert.True(t, opened, "the slow rank is still found among liars: %v", v)
}
