package rules

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestConditionForms(t *testing.T) {
	one := 1.0
	valid := []Condition{
		{Signal: "s", Op: OpGT, Value: &one},
		{Signal: "s", Agg: AggDelta, Op: OpGE, Value: &one, MinSamples: 2},
		{Signal: "s", In: []any{48, "x", 1.5}},
		{Signal: "s", Op: OpNaN},
		{Signal: "s", Agg: AggAbsent},
		{Signal: "s", Agg: AggMin, Op: OpGE, Value: &one, LastSamples: 3},
		{Signal: "s", Agg: AggMin, Op: OpGE, Value: &one, LastSamples: 3, MinSamples: 3},
		{Signal: "s", Agg: AggDistinct, Op: OpGE, Value: &one},
	}
	for _, c := range valid {
		assert.NoError(t, c.validate(), "%+v", c)
	}
	invalid := []Condition{
		{Op: OpGT, Value: &one},
		{Signal: "s"},
		{Signal: "s", Op: OpGT},
		{Signal: "s", Op: OpNaN, Value: &one},
		{Signal: "s", Agg: AggAbsent, Op: OpGT, Value: &one},
		{Signal: "s", In: []any{1}, Agg: AggMax},
		{Signal: "s", Op: OpGT, Value: &one, MinSamples: -1},
		{Signal: "s", Agg: "median", Op: OpGT, Value: &one},
		{Signal: "s", Agg: AggMin, Op: OpGE, Value: &one, LastSamples: -1},
		{Signal: "s", Agg: AggMin, Op: OpGE, Value: &one, LastSamples: 2, MinSamples: 3},
		{Signal: "s", Agg: AggAbsent, LastSamples: 2},
		{Signal: "s", Agg: AggDistinct},
	}
	for _, c := range invalid {
		assert.Error(t, c.validate(), "%+v", c)
	}
}

func TestOps(t *testing.T) {
	assert.True(t, OpGT.compare(2, 1))
	assert.False(t, OpGT.compare(1, 1))
	assert.True(t, OpGE.compare(1, 1))
	assert.True(t, OpLT.compare(0, 1))
	assert.True(t, OpLE.compare(1, 1))
	assert.True(t, OpEQ.compare(1, 1))
	assert.True(t, OpNE.compare(0, 1))
	assert.False(t, Op("~").compare(1, 1))
}

func TestDisabledRuleNeedsOnlyAName(t *testing.T) {
	assert.NoError(t, Rule{Name: "x", Disabled: true}.Validate())
	assert.Error(t, Rule{Disabled: true}.Validate())
}

func TestValidateSignalsNamesRuleAndSignal(t *testing.T) {
	one := 1.0
	known := map[string]bool{"gpu.nvlink.errors": true, "gpu.xid": true}
	emitted := func(s string) bool { return known[s] }
	r := Rule{Name: "mine",
		All: []Condition{{Signal: "gpu.nvlink.errors{error.type=crc_flit}", Agg: AggDelta, Op: OpGT, Value: &one}},
		Any: []Condition{{Signal: "gpu.xid", In: []any{48}}, {Signal: "gpu.bogus{k=v}", Op: OpGT, Value: &one}}}
	err := r.ValidateSignals(emitted)
	assert.EqualError(t, err, `rules: rule "mine": field any[1]: signal: no component emits "gpu.bogus"`)
	r.Any = r.Any[:1]
	assert.NoError(t, r.ValidateSignals(emitted), "a selector names its signal before {")
	assert.Equal(t, "hw.errors", SignalName("hw.errors{error.type=link_downed}"))
	assert.Equal(t, "gpu.xid", SignalName("gpu.xid"))
}
