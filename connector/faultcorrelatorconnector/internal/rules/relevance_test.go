package rules

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

func TestRelevanceOfConditions(t *testing.T) {
	zero, hundred := 0.0, 100.0
	num := func(v float64) Sample { return Sample{Value: v} }
	cases := []struct {
		name string
		c    Condition
		keep []Sample
		skip []Sample
	}{
		{"max above", Condition{Agg: AggMax, Op: OpGT, Value: &hundred},
			[]Sample{num(101), num(math.NaN()), num(math.Inf(-1)), {Text: "x"}}, []Sample{num(100), num(0), num(-5)}},
		{"max at or above", Condition{Agg: AggMax, Op: OpGE, Value: &hundred}, []Sample{num(100), num(101)}, []Sample{num(99.9)}},
		{"nan", Condition{Op: OpNaN}, []Sample{num(math.NaN()), num(math.Inf(1))}, []Sample{num(2.1), num(0)}},
		{"pass if missing", Condition{Agg: AggMax, Op: OpGT, Value: &zero, PassIfMissing: true}, []Sample{num(0)}, nil},
		{"min samples", Condition{Agg: AggMax, Op: OpGT, Value: &zero, MinSamples: 3}, []Sample{num(0)}, nil},
		{"last samples", Condition{Agg: AggMax, Op: OpGT, Value: &zero, LastSamples: 3}, []Sample{num(0)}, nil},
		{"max below", Condition{Agg: AggMax, Op: OpLT, Value: &hundred}, []Sample{num(0), num(200)}, nil},
		{"delta", Condition{Agg: AggDelta, Op: OpGT, Value: &zero}, []Sample{num(0)}, nil},
		{"in", Condition{In: []any{0}}, []Sample{num(0)}, nil},
	}
	for _, tc := range cases {
		r := conditionRelevance(tc.c)
		for _, s := range tc.keep {
			assert.True(t, r.keeps(&s), "%s: keeps %+v", tc.name, s)
		}
		for _, s := range tc.skip {
			assert.False(t, r.keeps(&s), "%s: skips %+v", tc.name, s)
		}
	}

	// Two conditions on one signal keep what either needs.
	gt0 := conditionRelevance(Condition{Agg: AggMax, Op: OpGT, Value: &zero})
	ge100 := conditionRelevance(Condition{Agg: AggMax, Op: OpGE, Value: &hundred})
	assert.Equal(t, gt0, gt0.union(ge100))
	assert.Equal(t, gt0, ge100.union(gt0))
	assert.Equal(t, relevance{floor: 0}, gt0.union(conditionRelevance(Condition{Agg: AggMax, Op: OpGE, Value: &zero})))
	assert.True(t, gt0.union(conditionRelevance(Condition{Agg: AggMean, Op: OpGT, Value: &zero})).all)
}

// Samples no condition can be changed by are not stored, and the rules
// decide as if they had been: the default nvlink CRC health (max > 100)
// and loss (nan) rules.
func TestIrrelevantSamplesAreNotStored(t *testing.T) {
	rs, err := Default()
	require.NoError(t, err)
	ev := NewEvaluator(rs, Limits{})
	for i := 0; i < 50; i++ {
		at := t0.Add(time.Duration(i) * time.Second)
		assert.False(t, ev.Observe(gpuG, sigHealthCRC, 0, at), "a CRC count under the threshold")
		assert.False(t, ev.Observe(jobJ, "training.loss", 2.1, at), "a finite loss")
	}
	assert.Zero(t, ev.Entities(), "nothing stored")

	// What does matter is stored and decides as before.
	require.True(t, ev.Observe(jobJ, "training.loss", math.NaN(), t0.Add(time.Duration(50)*time.Second)))
	m, ok := findRule(ev.Evaluate(t0.Add(time.Duration(51)*time.Second)), "loss_nan")
	require.True(t, ok)
	assert.True(t, math.IsNaN(m.Evidence[0].Value))
	assert.Equal(t, t0.Add(time.Duration(50)*time.Second), m.Since)
	assert.True(t, ev.Observe(gpuG, sigHealthCRC, 101, t0.Add(time.Duration(52)*time.Second)))
	assert.True(t, ev.Observe(gpuG, sigHealthTemp, 70, t0.Add(time.Duration(52)*time.Second)), "temperature: max < 85 with pass_if_missing keeps every sample")
	assert.Equal(t, 2, ev.Entities())
	assert.Equal(t, fault.EntityJob, m.Entity.Kind)
}
