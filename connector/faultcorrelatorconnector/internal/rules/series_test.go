package rules

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

// A series keeps its samples in time order, arrivals late or not, while
// insert moves them back to the start of their array instead of growing a
// new one: over many windows its array stays within twice the samples it
// keeps.
func TestSeriesReusesItsArray(t *testing.T) {
	one := 0.0
	c := Condition{Signal: "c", Agg: AggCount, Op: OpGT, Value: &one}
	r := Rule{Name: "r", FaultType: fault.TypeGPUThermal, Severity: fault.SeverityP2, Action: fault.ActionNone,
		BlastRadius: fault.BlastGPU, Confidence: 1, Entity: fault.EntityGPU, Window: 10 * time.Second, All: []Condition{c}}
	ev := NewEvaluator([]Rule{r}, Limits{})
	id := ev.ids["c"]
	for i := 0; i < 1000; i++ {
		at := t0.Add(time.Duration(i) * time.Second)
		if i%7 == 3 {
			at = at.Add(-2 * time.Second) // two seconds late
		}
		require.True(t, ev.Observe(gpuG, "c", float64(i), at))
		sr := ev.entities[gpuG].get(id)
		for j := 1; j < len(sr.points); j++ {
			require.GreaterOrEqual(t, sr.points[j].at, sr.points[j-1].at, "sample %d out of order after observation %d", j, i)
		}
		require.LessOrEqual(t, len(sr.points), 13, "observation %d: only the window is kept", i)
		require.LessOrEqual(t, cap(sr.buf), 32, "observation %d: the array grew with every window", i)
	}
	ms := ev.Evaluate(t0.Add(999 * time.Second))
	require.Len(t, ms, 1)
	// In [989 s, 999 s]: 989, 991 to 996, 995 again (997, late), 998, 999.
	assert.InDelta(t, 10, ms[0].Evidence[0].Value, 0, "the samples of the last 10 s, both ends included")
}

// A full series drops its oldest samples a step at a time, never holding
// more than max_samples_per_series, and its window is still exact.
func TestFullSeriesTrimsInSteps(t *testing.T) {
	one := 0.0
	r := Rule{Name: "r", FaultType: fault.TypeGPUThermal, Severity: fault.SeverityP2, Action: fault.ActionNone,
		BlastRadius: fault.BlastGPU, Confidence: 1, Entity: fault.EntityGPU, Window: time.Hour,
		All: []Condition{{Signal: "c", Agg: AggCount, Op: OpGT, Value: &one}}}
	ev := NewEvaluator([]Rule{r}, Limits{MaxSamplesPerSeries: 256})
	id := ev.ids["c"]
	lengths := map[int]bool{}
	for i := 0; i < 2000; i++ {
		require.True(t, ev.Observe(gpuG, "c", float64(i), t0.Add(time.Duration(i)*time.Second)))
		n := len(ev.entities[gpuG].get(id).points)
		require.LessOrEqual(t, n, 256, "observation %d", i)
		if i >= 256 {
			lengths[n] = true
			require.GreaterOrEqual(t, n, 256-16, "observation %d", i)
		}
	}
	assert.Len(t, lengths, 17, "the series steps between 240 and 256 samples")
	assert.Equal(t, t0.Add(1999*time.Second).UnixNano()-int64(len(ev.entities[gpuG].get(id).points)-1)*int64(time.Second),
		ev.entities[gpuG].get(id).oldest, "the oldest kept sample is tracked")
}
