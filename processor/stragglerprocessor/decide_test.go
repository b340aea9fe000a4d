package stragglerprocessor

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-gpu/otelcol-gpu/internal/steprecord"
)

func stepSpan(dur time.Duration, attrs map[string]any) ptrace.Span {
	span := ptrace.NewSpan()
	span.SetStartTimestamp(pcommon.NewTimestampFromTime(t0))
	span.SetEndTimestamp(pcommon.NewTimestampFromTime(t0.Add(dur)))
	_ = span.Attributes().FromRaw(attrs)
	return span
}

func TestSignal(t *testing.T) {
	tests := []struct {
		name          string
		dur           time.Duration
		attrs         map[string]any
		compute, wait time.Duration
	}{
		{"model phases sum, dataload left out", 2 * time.Second, map[string]any{
			"training.phase.dataload_ns": 100, "training.phase.forward_ns": 200, "training.phase.backward_ns": 300,
			"training.phase.optimizer_ns": 400, "nccl.collectives.total_ns": 50}, 900, 50},
		{"dataload alone is no phase", 2 * time.Second, map[string]any{
			"training.phase.dataload_ns": int64(time.Second), "nccl.collectives.total_ns": int64(500 * time.Millisecond)}, 1500 * time.Millisecond, 500 * time.Millisecond},
		{"no phases: duration less collectives", 2 * time.Second, map[string]any{"nccl.collectives.total_ns": int64(500 * time.Millisecond)},
			1500 * time.Millisecond, 500 * time.Millisecond},
		{"nothing: duration", 2 * time.Second, map[string]any{}, 2 * time.Second, 0},
		{"negative phase counts zero", time.Second, map[string]any{"training.phase.forward_ns": -5, "training.phase.backward_ns": 7}, 7, 0},
		{"phases saturate", time.Second, map[string]any{"training.phase.forward_ns": int64(math.MaxInt64), "training.phase.backward_ns": int64(math.MaxInt64)},
			math.MaxInt64, 0},
		{"collectives longer than the step", time.Second, map[string]any{"nccl.collectives.total_ns": int64(3 * time.Second)}, 0, 3 * time.Second},
		{"end before start", -time.Second, map[string]any{}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			span := stepSpan(tt.dur, tt.attrs)
			var a steprecord.Attrs
			a.Read(span.Attributes(), true)
			c, w := signal(&a, span)
			assert.Equal(t, tt.compute, c)
			assert.Equal(t, tt.wait, w)
		})
	}
}

func TestObserveDuration(t *testing.T) {
	js := &jobState{durations: make([]time.Duration, 0, 4)}
	assert.False(t, js.observeDuration(time.Second, 3))
	assert.False(t, js.observeDuration(time.Second, 3))
	assert.False(t, js.observeDuration(10*time.Second, 3), "needs three earlier steps")
	// mean of 1, 1, 10 = 4: 13 s is slow, 12 s is not
	assert.False(t, js.observeDuration(12*time.Second, 3))
	// window now 1, 1, 10, 12 (mean 6); 19 s is slow
	assert.True(t, js.observeDuration(19*time.Second, 3))
	// window rolled: 1, 10, 12, 19 (mean 10.5)
	assert.InDelta(t, float64(42*time.Second), js.durationSum, 1)
	assert.Len(t, js.durations, 4)
}

func TestDecidedRing(t *testing.T) {
	js := &jobState{decided: map[int64]struct{}{}, decidedOrder: make([]int64, 0, 3)}
	for _, s := range []int64{10, 11, 12} {
		js.markDecided(s)
	}
	assert.True(t, js.isDecided(11))
	assert.True(t, js.isDecided(5), "older than everything remembered")
	assert.False(t, js.isDecided(13))
	js.markDecided(13) // forgets 10
	assert.Len(t, js.decided, 3)
	assert.True(t, js.isDecided(10), "below the floor 11")
	assert.False(t, js.isDecided(14))
}

// readAttrs is what gather reads of a span with attributes span under a
// resource with attributes res.
func readAttrs(span, res pcommon.Map) *steprecord.Attrs {
	var a, r steprecord.Attrs
	readStepSpan(&a, span)
	r.Read(res, false)
	a.Inherit(&r)
	return &a
}

// verdictOrScore is what gather's read says of a span's own verdict.
func verdictOrScore(span pcommon.Map) bool {
	var a steprecord.Attrs
	return readStepSpan(&a, span)
}

func TestGroupAndAttributes(t *testing.T) {
	span, res := pcommon.NewMap(), pcommon.NewMap()
	a := readAttrs(span, res)
	assert.Empty(t, a.Stage())
	assert.Zero(t, a.Found())
	res.PutInt("training.pp_stage", 3)
	assert.Equal(t, "3", readAttrs(span, res).Stage())
	span.PutStr("training.pp_stage", "first")
	assert.Equal(t, "first", readAttrs(span, res).Stage(), "the span wins")

	span.PutDouble("iteration.step", 42)
	a = readAttrs(span, res)
	assert.True(t, a.Has(steprecord.FieldStep))
	assert.Equal(t, int64(42), a.Int(steprecord.FieldStep))
	span.PutDouble("iteration.step", 4.5)
	assert.False(t, readAttrs(span, res).Has(steprecord.FieldStep))
	span.PutDouble("iteration.step", math.Inf(1))
	assert.False(t, readAttrs(span, res).Has(steprecord.FieldStep))
	res.PutInt("iteration.step", 7)
	assert.Equal(t, int64(7), readAttrs(span, res).Int(steprecord.FieldStep), "a span value of the wrong type leaves the resource's")

	res.PutStr("training.job.id", "j")
	assert.Equal(t, "j", readAttrs(span, res).Job())
	span.PutInt("training.job.id", 5)
	assert.Equal(t, "j", readAttrs(span, res).Job(), "a job id must be a string")
	span.PutStr("training.job.id", "")
	a = readAttrs(span, res)
	assert.Empty(t, a.Job(), "an empty id on the span is the span's")
	assert.True(t, a.Has(steprecord.FieldJob))

	// The phases and the time in collectives come from the span only.
	res.PutInt("training.phase.forward_ns", 100)
	res.PutInt("nccl.collectives.total_ns", 100)
	a = readAttrs(span, res)
	for _, f := range []steprecord.Field{steprecord.FieldPhaseForward, steprecord.FieldPhaseBackward,
		steprecord.FieldPhaseOptimizer, steprecord.FieldCollectivesTotalNs} {
		assert.False(t, a.Has(f), f.Key())
	}
	assert.False(t, verdictOrScore(span))
	span.PutStr("straggler.verdict", "straggler.compute")
	assert.True(t, verdictOrScore(span))
}

func TestVerdictSpanID(t *testing.T) {
	key := jobKey{job: "llama-70b"}
	contract := steprecord.RankSpanID("llama-70b", 0, 18231, 1045)
	// the training contract's worked example (docs/training-scripts.md)
	require.Equal(t, "d4e2405d44e75dfa", contract.String())
	id := verdictSpanID(key, 18231, 1045, contract)
	assert.Equal(t, "a28732392d8429db", id.String(), "d4e2405d44e75dfa XOR \"verdict!\"")
	assert.NotEqual(t, contract, id)

	// a rank span whose own id happens to be the verdict's
	clash := verdictSpanID(key, 18231, 1045, id)
	assert.NotEqual(t, id, clash)
	assert.NotEqual(t, contract, clash)
	assert.False(t, clash.IsEmpty())
}
