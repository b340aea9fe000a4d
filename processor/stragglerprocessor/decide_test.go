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
		// The phase contract: comm_wait declares compute-only phases.
		{"comm_wait: phases as they are, comm_wait is the wait", 2 * time.Second, map[string]any{
			"training.phase.forward_ns": 100, "training.phase.backward_ns": 200, "training.phase.optimizer_ns": 20,
			"training.phase.comm_wait_ns": 396, "nccl.collectives.tail_ns": 390}, 320, 396},
		{"comm_wait 0 still declares the contract", 2 * time.Second, map[string]any{
			"training.phase.backward_ns": 200, "training.phase.comm_wait_ns": 0, "nccl.collectives.tail_ns": 150}, 200, 0},
		{"total_ns is the wait over comm_wait", 2 * time.Second, map[string]any{
			"training.phase.backward_ns": 200, "training.phase.comm_wait_ns": 396, "nccl.collectives.total_ns": 500}, 200, 500},
		{"older contract: tail taken off backward", 2 * time.Second, map[string]any{
			"training.phase.forward_ns": 100, "training.phase.backward_ns": 596, "training.phase.optimizer_ns": 20,
			"nccl.collectives.tail_ns": 396, "nccl.collectives.total_ns": 450}, 320, 450},
		{"tail longer than backward: clamped at 0", 2 * time.Second, map[string]any{
			"training.phase.forward_ns": 100, "training.phase.backward_ns": 50, "nccl.collectives.tail_ns": 396}, 100, 0},
		{"tail without phases: duration less collectives", 2 * time.Second, map[string]any{
			"nccl.collectives.tail_ns": int64(time.Second), "nccl.collectives.total_ns": int64(500 * time.Millisecond)},
			1500 * time.Millisecond, 500 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			span := stepSpan(tt.dur, tt.attrs)
			var a steprecord.Attrs
			var x extraSignals
			readStepSpan(&a, &x, span.Attributes())
			c, w := signal(&a, span)
			assert.Equal(t, tt.compute, c)
			assert.Equal(t, tt.wait, w)
		})
	}
}

func TestHardwareTrouble(t *testing.T) {
	tests := []struct {
		attrs map[string]any
		want  bool
	}{
		{map[string]any{"gpu.health.xids": []any{int64(79)}}, true},
		{map[string]any{"gpu.health.throttle_reasons": []any{"hw_slowdown"}}, true},
		{map[string]any{"gpu.health.throttle_reasons": []any{}}, false},
		{map[string]any{"gpu.health.ecc_dbe_errors": int64(1)}, true},
		{map[string]any{"gpu.health.ecc_dbe_errors": int64(0), "gpu.health.nvlink_crc_errors": int64(0)}, false},
		{map[string]any{"gpu.health.nvlink_crc_errors": int64(3)}, true},
		{map[string]any{"gpu.health.ecc_sbe_errors": int64(9), "gpu.health.temperature": 90.0}, false},
		{map[string]any{"gpu.health.xids": "79"}, false},
	}
	for _, tt := range tests {
		var a steprecord.Attrs
		var x extraSignals
		span := stepSpan(time.Second, tt.attrs)
		readStepSpan(&a, &x, span.Attributes())
		assert.Equal(t, tt.want, x.hwTrouble, "%v", tt.attrs)
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
	readStepSpan(&a, &extraSignals{}, span)
	r.Read(res, false)
	a.Inherit(&r)
	return &a
}

// verdictOrScore is what gather's read says of a span's own verdict.
func verdictOrScore(span pcommon.Map) bool {
	var a steprecord.Attrs
	return readStepSpan(&a, &extraSignals{}, span)
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
