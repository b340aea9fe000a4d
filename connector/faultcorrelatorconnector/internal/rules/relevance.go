package rules

import "math"

// relevance says which samples of a signal can change what some condition
// reading it decides: all of them, or only texts, non-finite values and
// values above floor (or at it, when not strict). A maximum over a
// threshold is not changed by a sample at or under it, nor `op: nan` by a
// finite one: a healthy GPU's zero error counts and a job's every finite
// loss, most of what rank spans carry, need not be stored.
type relevance struct {
	all    bool
	floor  float64
	strict bool
}

// conditionRelevance is the relevance of c alone.
func conditionRelevance(c Condition) relevance {
	if c.PassIfMissing || c.MinSamples > 1 || c.LastSamples > 0 || len(c.In) > 0 {
		// Fewer samples would change what is missing or counted.
		return relevance{all: true}
	}
	switch {
	case c.Op == OpNaN:
		return relevance{floor: math.Inf(1), strict: true}
	case c.Agg == AggMax && c.Value != nil && c.Op == OpGT:
		return relevance{floor: *c.Value, strict: true}
	case c.Agg == AggMax && c.Value != nil && c.Op == OpGE:
		return relevance{floor: *c.Value}
	}
	return relevance{all: true}
}

// union is what either r or o needs.
func (r relevance) union(o relevance) relevance {
	switch {
	case r.all || o.all:
		return relevance{all: true}
	case r.floor == o.floor:
		return relevance{floor: r.floor, strict: r.strict && o.strict}
	case o.floor < r.floor:
		return o
	}
	return r
}

// keeps reports whether s may change a decision. A NaN is kept: as the
// latest sample it starts a maximum that nothing exceeds.
func (r relevance) keeps(s *Sample) bool {
	v := s.Value
	switch {
	case r.all || s.Text != "" || math.IsNaN(v) || math.IsInf(v, 0):
		return true
	case r.strict:
		return v > r.floor
	}
	return v >= r.floor
}
