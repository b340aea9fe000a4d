package stragglerprocessor

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-gpu/otelcol-gpu/internal/stepid"
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
			c, w := signal(stepSpan(tt.dur, tt.attrs))
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

func TestGroupAndAttributes(t *testing.T) {
	span, res := pcommon.NewMap(), pcommon.NewMap()
	assert.Empty(t, groupOf(span, res))
	res.PutInt("training.pp_stage", 3)
	assert.Equal(t, "3", groupOf(span, res))
	span.PutStr("training.pp_stage", "first")
	assert.Equal(t, "first", groupOf(span, res), "the span wins")

	span.PutDouble("iteration.step", 42)
	v, ok := intAttr(span, res, "iteration.step")
	assert.True(t, ok)
	assert.Equal(t, int64(42), v)
	span.PutDouble("iteration.step", 4.5)
	_, ok = intAttr(span, res, "iteration.step")
	assert.False(t, ok)
	span.PutDouble("iteration.step", math.Inf(1))
	_, ok = intAttr(span, res, "iteration.step")
	assert.False(t, ok)
	res.PutStr("training.job.id", "j")
	assert.Equal(t, "j", strAttr(span, res, "training.job.id"))
}

func TestVerdictSpanID(t *testing.T) {
	key := jobKey{job: "llama-70b"}
	contract := stepid.RankSpanID("llama-70b", 0, 18231, 1045)
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
