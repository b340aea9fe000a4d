// Package rules holds the faultcorrelator's declarative fault rules (YAML),
// the defaults that ship with it (every rule of the operations documents and
// one rule per row of the XID table) and a small evaluator over per-entity
// sliding windows of observations. It knows no collector types; the
// correlator maps metrics, logs and spans onto Observe calls and matches onto
// fault records. It holds no package-level state.
package rules

import (
	"fmt"
	"strings"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

// Agg reduces the samples of one signal in the window to a number.
type Agg string

// Aggregations.
const (
	AggLast  Agg = "last" // the latest sample (the default)
	AggMin   Agg = "min"
	AggMax   Agg = "max"
	AggMean  Agg = "mean"
	AggCount Agg = "count" // samples in the window
	// AggDelta is a counter's growth over the window: the sum of increases
	// between consecutive samples, a drop counted as a reset to zero.
	AggDelta Agg = "delta"
	// AggRate is AggDelta per second of the window's sample span.
	AggRate Agg = "rate"
	// AggBaselineRatio is the largest ratio, within the window, of a sample
	// to the entity's rolling baseline of that signal (an exponentially
	// weighted mean of the samples before it). Needs BaselineMinSamples.
	AggBaselineRatio Agg = "baseline_ratio"
	// AggAbsent holds when the entity reported the signal before but not
	// within the window: a node, GPU or rank that went silent. Takes no op.
	AggAbsent Agg = "absent"
	// AggDistinct is the number of distinct values (texts, or numbers for
	// numeric samples) in the window; the evidence lists each one (its
	// latest sample). Used to count distinct faults on a node.
	AggDistinct Agg = "distinct"
)

func (a Agg) valid() bool {
	switch a {
	case AggLast, AggMin, AggMax, AggMean, AggCount, AggDelta, AggRate, AggBaselineRatio, AggAbsent, AggDistinct:
		return true
	}
	return false
}

// Op compares an aggregate with Condition.Value.
type Op string

// Comparison operators. OpNaN holds when any sample in the window is NaN or
// infinite (a loss that diverged) and takes no value.
const (
	OpGT  Op = ">"
	OpGE  Op = ">="
	OpLT  Op = "<"
	OpLE  Op = "<="
	OpEQ  Op = "=="
	OpNE  Op = "!="
	OpNaN Op = "nan"
)

func (o Op) compare(x, v float64) bool {
	switch o {
	case OpGT:
		return x > v
	case OpGE:
		return x >= v
	case OpLT:
		return x < v
	case OpLE:
		return x <= v
	case OpEQ:
		return x == v
	case OpNE:
		return x != v
	}
	return false
}

// Condition is one signal test. Exactly one form:
//   - op + value on agg (a threshold, delta, rate or baseline ratio);
//   - in: any sample in the window equals one of the listed numbers or
//     texts (a log match such as gpu.xid in [48], or a span attribute such
//     as straggler.verdict in [straggler.compute]);
//   - op: nan;
//   - agg: absent.
type Condition struct {
	// Signal names what the correlator observes: a metric name with at most
	// one attribute selector ("gpu.ecc.errors{gpu.ecc.type=dbe_volatile}"),
	// a log attribute ("gpu.xid", "nccl.finding") or a span attribute
	// ("straggler.verdict"). See docs/fault-record.md.
	Signal     string   `yaml:"signal"`
	Agg        Agg      `yaml:"agg,omitempty"`
	Op         Op       `yaml:"op,omitempty"`
	Value      *float64 `yaml:"value,omitempty"`
	In         []any    `yaml:"in,omitempty"`
	MinSamples int      `yaml:"min_samples,omitempty"` // the aggregate needs this many samples (default 1)
	// LastSamples, when > 0, tests only the newest N samples in the window
	// and needs N of them: "throttled in the last 3 scrapes" fires on the
	// third throttled scrape instead of after a whole window of them.
	LastSamples int `yaml:"last_samples,omitempty"`
	// PassIfMissing makes the condition hold when the signal has no sample
	// in the window: "temperature normal" must not block a rule on nodes
	// that do not report temperature.
	PassIfMissing bool `yaml:"pass_if_missing,omitempty"`
}

// Rule is one fault pattern. It matches an entity when every All condition
// holds and, if Any is not empty, at least one Any condition holds.
type Rule struct {
	Name        string            `yaml:"name"`
	Description string            `yaml:"description,omitempty"`
	Disabled    bool              `yaml:"disabled,omitempty"` // an override that switches a default off
	FaultType   fault.Type        `yaml:"fault_type"`
	Severity    fault.Severity    `yaml:"severity"`
	Action      fault.Action      `yaml:"action"`
	BlastRadius fault.BlastRadius `yaml:"blast_radius"`
	Confidence  float64           `yaml:"confidence"`
	Entity      fault.EntityKind  `yaml:"entity"`
	Window      time.Duration     `yaml:"window"`
	All         []Condition       `yaml:"all,omitempty"`
	Any         []Condition       `yaml:"any,omitempty"`
}

// Validate reports the first problem of r, naming the rule and the field.
func (r Rule) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("rules: rule %q: field %s: %s", r.Name, field, fmt.Sprintf(format, args...))
	}
	if r.Name == "" {
		return bad("name", "empty")
	}
	if r.Disabled {
		return nil // a disabled override needs only its name
	}
	if !r.FaultType.Valid() {
		return bad("fault_type", "unknown fault type %q", r.FaultType)
	}
	if !r.Severity.Valid() {
		return bad("severity", "%q is not P1, P2, P3 or P4", r.Severity)
	}
	if !r.Action.Valid() {
		return bad("action", "unknown action %q", r.Action)
	}
	if !r.BlastRadius.Valid() {
		return bad("blast_radius", "unknown blast radius %q", r.BlastRadius)
	}
	if !(r.Confidence > 0 && r.Confidence <= 1) {
		return bad("confidence", "%v is outside (0, 1]", r.Confidence)
	}
	if !r.Entity.Valid() {
		return bad("entity", "unknown entity kind %q", r.Entity)
	}
	if r.Window <= 0 {
		return bad("window", "must be positive, got %v", r.Window)
	}
	if len(r.All) == 0 && len(r.Any) == 0 {
		return bad("all", "a rule needs at least one condition in all or any")
	}
	for i, c := range r.All {
		if err := c.validate(); err != nil {
			return bad(fmt.Sprintf("all[%d]", i), "%v", err)
		}
	}
	for i, c := range r.Any {
		if err := c.validate(); err != nil {
			return bad(fmt.Sprintf("any[%d]", i), "%v", err)
		}
	}
	return nil
}

// ValidateSignals reports the first condition of r naming a signal that
// emitted says nothing emits, naming the rule, the condition and the
// signal: such a rule would never hold. A selector
// ("gpu.nvlink.errors{error.type=crc_flit}") names its signal before "{".
// Validate stays free of it, so that the evaluator's own tests may use
// made-up signals; the connector passes its registry (internal/semconv).
func (r Rule) ValidateSignals(emitted func(signal string) bool) error {
	for _, conds := range []struct {
		field string
		list  []Condition
	}{{"all", r.All}, {"any", r.Any}} {
		for i, c := range conds.list {
			if name := SignalName(c.Signal); !emitted(name) {
				return fmt.Errorf("rules: rule %q: field %s[%d]: signal: no component emits %q", r.Name, conds.field, i, name)
			}
		}
	}
	return nil
}

// SignalName is the signal a condition's signal field names: the text
// before a "{k=v}" selector.
func SignalName(signal string) string {
	name, _, _ := strings.Cut(signal, "{")
	return name
}

func (c Condition) validate() error {
	if c.Signal == "" {
		return fmt.Errorf("signal: empty")
	}
	if c.Agg != "" && !c.Agg.valid() {
		return fmt.Errorf("agg: unknown aggregation %q", c.Agg)
	}
	if c.MinSamples < 0 {
		return fmt.Errorf("min_samples: negative")
	}
	if c.LastSamples < 0 {
		return fmt.Errorf("last_samples: negative")
	}
	if c.LastSamples > 0 && c.MinSamples > c.LastSamples {
		return fmt.Errorf("min_samples: %d can never be met over last_samples: %d", c.MinSamples, c.LastSamples)
	}
	if c.LastSamples > 0 && c.Agg == AggAbsent {
		return fmt.Errorf("last_samples: agg absent reads no samples")
	}
	switch {
	case len(c.In) > 0:
		if c.Op != "" || c.Value != nil || (c.Agg != "" && c.Agg != AggLast) {
			return fmt.Errorf("in: cannot be combined with op, value or agg")
		}
		for j, v := range c.In {
			if _, ok := Number(v); ok {
				continue
			}
			if _, ok := v.(string); !ok {
				return fmt.Errorf("in[%d]: %v is neither a number nor a text", j, v)
			}
		}
	case c.Agg == AggAbsent:
		if c.Op != "" || c.Value != nil {
			return fmt.Errorf("agg: absent takes no op or value")
		}
	case c.Op == OpNaN:
		if c.Value != nil {
			return fmt.Errorf("op: nan takes no value")
		}
	case c.Op == "":
		return fmt.Errorf("op: missing (or give in:, op: nan or agg: absent)")
	default:
		if !(c.Op == OpGT || c.Op == OpGE || c.Op == OpLT || c.Op == OpLE || c.Op == OpEQ || c.Op == OpNE) {
			return fmt.Errorf("op: unknown operator %q", c.Op)
		}
		if c.Value == nil {
			return fmt.Errorf("value: missing for op %q", c.Op)
		}
	}
	return nil
}

// Number converts a YAML number (a rule's in: list, a match's XID codes)
// to float64; anything else is not a number.
func Number(v any) (float64, bool) {
	switch n := v.(type) {
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case uint64:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}
