package straggler

import (
	"fmt"
	"math"
)

// Rule selects which per-step test flags a rank.
type Rule string

const (
	// RuleRobust flags a rank whose modified z-score within its group is at
	// least Options.ZThreshold. The default: it neither lets one straggler
	// drag the reference (8 ranks) nor lets it vanish in the mean (16,384).
	RuleRobust Rule = "robust"
	// RuleMeanFactor is the operations documents' rule: a rank slower than
	// Options.Factor times its group's mean.
	RuleMeanFactor Rule = "mean_factor"
	// RuleBoth flags only where both tests agree (the most conservative).
	RuleBoth Rule = "both"
)

// Defaults. The reasons are in the package documentation.
const (
	DefaultRule         = RuleRobust
	DefaultFactor       = 2.0
	DefaultZThreshold   = 3.5
	DefaultMinExcess    = 0.25
	DefaultMADFloor     = 0.01
	DefaultMinGroupSize = 3
)

// Options configures DecideStep. A zero field takes its default, so the
// zero Options is the default configuration.
type Options struct {
	// Rule is the test that flags a rank: robust (default), mean_factor or both.
	Rule Rule
	// Factor is the mean_factor rule's multiple of the group mean (default 2).
	Factor float64
	// ZThreshold is the modified z-score at or above which the robust rule
	// flags (default 3.5, Iglewicz and Hoaglin's outlier cut-off).
	ZThreshold float64
	// MinExcess is the least a flagged rank must exceed its group median,
	// as a fraction of that median (default 0.25: 25% slower). It applies to
	// every rule and stops tight groups from flagging small offsets.
	MinExcess float64
	// MADFloor is the least the MAD may be, as a fraction of the group
	// median (default 0.01), so that identical ranks give finite scores.
	MADFloor float64
	// MinGroupSize is the least number of ranks a group needs before any of
	// them can be flagged (default 3: two ranks have no majority).
	MinGroupSize int
}

// DefaultOptions returns the defaults spelled out.
func DefaultOptions() Options {
	return Options{
		Rule:         DefaultRule,
		Factor:       DefaultFactor,
		ZThreshold:   DefaultZThreshold,
		MinExcess:    DefaultMinExcess,
		MADFloor:     DefaultMADFloor,
		MinGroupSize: DefaultMinGroupSize,
	}
}

// Validate reports the first field that is set but unusable. Unset (zero)
// fields are valid: they take their defaults.
func (o Options) Validate() error {
	switch o.Rule {
	case "", RuleRobust, RuleMeanFactor, RuleBoth:
	default:
		return fmt.Errorf("straggler: options: rule %q is not one of robust, mean_factor, both", o.Rule)
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"factor", o.Factor}, {"z_threshold", o.ZThreshold}, {"min_excess", o.MinExcess}, {"mad_floor", o.MADFloor}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < 0 {
			return fmt.Errorf("straggler: options: %s = %v must be a finite number >= 0", f.name, f.v)
		}
	}
	if o.Factor != 0 && o.Factor <= 1 {
		return fmt.Errorf("straggler: options: factor = %v must be above 1 (a rank cannot be slower than the mean by a factor <= 1)", o.Factor)
	}
	if o.MinGroupSize < 0 {
		return fmt.Errorf("straggler: options: min_group_size = %d must be >= 0", o.MinGroupSize)
	}
	return nil
}

// withDefaults fills unset or unusable fields with their defaults, so that
// DecideStep never works on a NaN or a nonsensical rule even when the caller
// skipped Validate.
func (o Options) withDefaults() Options {
	switch o.Rule {
	case RuleRobust, RuleMeanFactor, RuleBoth:
	default:
		o.Rule = DefaultRule
	}
	usable := func(v float64) bool { return v > 0 && !math.IsInf(v, 0) } // NaN fails v > 0
	if !usable(o.Factor) || o.Factor <= 1 {
		o.Factor = DefaultFactor
	}
	if !usable(o.ZThreshold) {
		o.ZThreshold = DefaultZThreshold
	}
	if !usable(o.MinExcess) {
		o.MinExcess = DefaultMinExcess
	}
	if !usable(o.MADFloor) {
		o.MADFloor = DefaultMADFloor
	}
	if o.MinGroupSize <= 0 {
		o.MinGroupSize = DefaultMinGroupSize
	}
	return o
}
