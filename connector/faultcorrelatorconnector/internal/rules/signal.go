package rules

import "github.com/otelcol-gpu/otelcol-gpu/internal/fault"

// Signal is a signal name resolved by one Evaluator (Evaluator.Signal), for
// hot paths that observe the same names over and over: it tells which
// entity kinds' rules read the signal without a lookup by name. Only the
// Evaluator that resolved it may take it.
type Signal struct {
	id    int
	kinds kindSet // none when no rule reads the signal
	rel   relevance
}

// Signal resolves name. The zero kinds of a name no rule reads make
// ReadBy false for every kind.
func (e *Evaluator) Signal(name string) Signal {
	if id, used := e.ids[name]; used {
		return Signal{id: id, kinds: e.kinds[id], rel: e.rel[id]}
	}
	return Signal{id: -1}
}

// ReadBy reports whether a rule on entities of kind k reads s: whether
// ObserveSignal would keep a sample of s for such an entity (entity limit
// aside).
func (s Signal) ReadBy(k fault.EntityKind) bool { return s.kinds.has(k) }

// keepsFor reports whether ref's entity keeps sample v of s: a rule on the
// entity's kind reads s, and v can change one of its conditions.
func (s *Signal) keepsFor(ref *EntityRef, v *Sample) bool {
	return s.kinds&ref.kindBit() != 0 && s.rel.keeps(v)
}

// Keeps reports whether an entity of some kind keeps v: a rule reads s,
// and v can change one of its conditions. A hot path checks it once per
// sample, before observing the sample under each of its entities.
func (s *Signal) Keeps(v *Sample) bool { return s.kinds != 0 && s.rel.keeps(v) }

// Read reports whether any rule reads s.
func (s Signal) Read() bool { return s.kinds != 0 }
