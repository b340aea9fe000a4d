package rules

import (
	"sort"
	"sync"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

// Limits bound the evaluator's memory. Zero fields take the defaults.
type Limits struct {
	MaxEntities         int // entities tracked at once (default 100,000); new ones beyond are dropped
	MaxSamplesPerSeries int // samples kept per entity and signal (default 256); the oldest go first
	// ForgetAfter: an entity silent this long is forgotten (default 1 h);
	// absent rules fire until then. An entity kind that a rule reads over a
	// longer window (node_repeated_faults: 24 h) is kept for that window.
	ForgetAfter        time.Duration
	BaselineAlpha      float64 // weight of a new sample in the rolling baseline (default 0.05)
	BaselineMinSamples int     // samples before a baseline counts (default 5)
}

func (l Limits) withDefaults() Limits {
	if l.MaxEntities <= 0 {
		l.MaxEntities = 100_000
	}
	if l.MaxSamplesPerSeries <= 0 {
		l.MaxSamplesPerSeries = 256
	}
	if l.ForgetAfter <= 0 {
		l.ForgetAfter = time.Hour
	}
	if !(l.BaselineAlpha > 0 && l.BaselineAlpha <= 1) {
		l.BaselineAlpha = 0.05
	}
	if l.BaselineMinSamples <= 0 {
		l.BaselineMinSamples = 5
	}
	return l
}

// Evaluator keeps a sliding window of samples per entity and signal and
// evaluates the rules over them. Safe for concurrent use.
type Evaluator struct {
	rules  []Rule
	conds  []compiledRule // per rule: its conditions' signal ids
	byKind map[fault.EntityKind][]int
	ids    map[string]int  // signal name -> id, for every signal a rule reads
	keep   []time.Duration // per signal id: the longest window of a rule reading it
	kinds  []kindSet       // per signal id: the entity kinds whose rules read it
	rel    []relevance     // per signal id: the samples some condition can be changed by
	forget map[fault.EntityKind]time.Duration
	limits Limits

	mu        sync.Mutex
	entities  map[fault.Entity]*entityState
	texts     textTable       // the texts of kept samples
	changed   []changedEntity // entities with samples since their last evaluation (EvaluateChanged)
	dropped   uint64
	nextSweep time.Time // when Evaluate next frees the samples of stale series
}

// sweepEvery is how often Evaluate frees the samples of series that stopped
// receiving them.
const sweepEvery = time.Minute

// kindSet is a set of entity kinds.
type kindSet uint8

func kindBit(k fault.EntityKind) kindSet {
	switch k {
	case fault.EntityGPU:
		return 1
	case fault.EntityNode:
		return 2
	case fault.EntityNVLinkDomain:
		return 4
	case fault.EntityIBPort:
		return 8
	case fault.EntityRank:
		return 16
	case fault.EntityJob:
		return 32
	}
	return 0
}

func (s kindSet) with(k fault.EntityKind) kindSet { return s | kindBit(k) }
func (s kindSet) has(k fault.EntityKind) bool     { return s&kindBit(k) != 0 }

// compiledRule holds the signal ids of a rule's All and Any conditions, so
// that evaluation indexes series instead of hashing signal names.
type compiledRule struct{ all, any []int }

// NewEvaluator returns an evaluator for rules (disabled rules are skipped;
// callers validate with Load first).
func NewEvaluator(rules []Rule, limits Limits) *Evaluator {
	e := &Evaluator{
		byKind:   map[fault.EntityKind][]int{},
		ids:      map[string]int{},
		forget:   map[fault.EntityKind]time.Duration{},
		limits:   limits.withDefaults(),
		entities: map[fault.Entity]*entityState{},
		texts:    newTextTable(),
	}
	idOf := func(c Condition, r Rule) int {
		id, ok := e.ids[c.Signal]
		if !ok {
			id = len(e.keep)
			e.ids[c.Signal] = id
			e.keep = append(e.keep, 0)
			e.kinds = append(e.kinds, 0)
			e.rel = append(e.rel, conditionRelevance(c))
		}
		e.keep[id] = max(e.keep[id], r.Window)
		e.kinds[id] = e.kinds[id].with(r.Entity)
		e.rel[id] = e.rel[id].union(conditionRelevance(c))
		return id
	}
	for _, r := range rules {
		if r.Disabled {
			continue
		}
		e.forget[r.Entity] = max(e.forget[r.Entity], r.Window)
		e.byKind[r.Entity] = append(e.byKind[r.Entity], len(e.rules))
		var cr compiledRule
		for _, c := range r.All {
			cr.all = append(cr.all, idOf(c, r))
		}
		for _, c := range r.Any {
			cr.any = append(cr.any, idOf(c, r))
		}
		e.rules = append(e.rules, r)
		e.conds = append(e.conds, cr)
	}
	return e
}

// ForgetAfter returns how long an entity of kind k is remembered after its
// last sample: Limits.ForgetAfter, or the longest window of a rule on k.
func (e *Evaluator) ForgetAfter(k fault.EntityKind) time.Duration {
	return max(e.limits.ForgetAfter, e.forget[k])
}

// Signals returns the names of the signals the rules read, sorted: only
// their samples are kept, so callers may skip the rest before building them.
func (e *Evaluator) Signals() []string {
	out := make([]string, 0, len(e.ids))
	for s := range e.ids {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// Dropped returns how many samples were refused because of MaxEntities.
func (e *Evaluator) Dropped() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.dropped
}

// Entities returns how many entities are tracked.
func (e *Evaluator) Entities() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.entities)
}
