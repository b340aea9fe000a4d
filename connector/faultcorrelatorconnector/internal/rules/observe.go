package rules

import (
	"math"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

// Sample is one observation of a signal: a number, or a text (Text set) for
// log and span attributes such as straggler.verdict.
type Sample struct {
	Signal string
	Value  float64
	Text   string
	// At places the sample in the rule windows: the reading's own time,
	// or, for the readings the gateway takes from spans, their arrival
	// (then DataTime holds the reading's own time).
	At time.Time
	// DataTime is when the reading was taken where that is not At; zero
	// means At. Evidence keeps it as its Time, and At as ObservedAt.
	DataTime time.Time
	// Onset is when the condition the sample reports began, where the
	// input says (a straggler verdict's straggler.onset_unix_nano); zero
	// when it does not. A match reports the earliest onset of its
	// evidence (Match.Onset).
	Onset   time.Time
	TraceID pcommon.TraceID
	SpanID  pcommon.SpanID
}

// Observe records a numeric sample. See ObserveSample.
func (e *Evaluator) Observe(entity fault.Entity, signal string, value float64, at time.Time) bool {
	return e.ObserveSample(entity, Sample{Signal: signal, Value: value, At: at})
}

// ObserveSample records s for entity. It returns false when the sample was
// not kept: no rule on entity's kind reads the signal, no condition can be
// changed by it (relevance: a zero under "max > 0"), or the entity limit is
// reached.
func (e *Evaluator) ObserveSample(entity fault.Entity, s Sample) bool {
	return e.ObserveSignal(entity, e.Signal(s.Signal), s)
}

// ObserveSignal is ObserveSample with s.Signal resolved as sig by this
// Evaluator's Signal; s.Signal itself is not read.
func (e *Evaluator) ObserveSignal(entity fault.Entity, sig Signal, s Sample) bool {
	ref := EntityRef{Entity: entity}
	return e.ObserveRef(&ref, sig, s)
}

// EntityRef is an entity and, once one of its samples was kept, its state:
// the next samples of a run (the signals of one span) skip the lookup by
// entity. A new EntityRef{Entity: e} is unresolved; one whose entity
// Evaluate has since forgotten looks it up again.
type EntityRef struct {
	Entity fault.Entity
	st     *entityState
	kind   kindSet // kindBit(Entity.Kind) once computed: kinds are strings
}

// kindBit returns the kind of ref's entity as a kindSet.
func (ref *EntityRef) kindBit() kindSet {
	if ref.kind == 0 {
		ref.kind = kindBit(ref.Entity.Kind)
	}
	return ref.kind
}

// ObserveRef is ObserveSignal through ref, which it resolves on first use.
func (e *Evaluator) ObserveRef(ref *EntityRef, sig Signal, s Sample) bool {
	if !sig.keepsFor(ref, &s) {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.observeRefLocked(ref, sig.id, &s)
}

// Batch observes a run of samples under one hold of the evaluator's lock,
// for hot paths that observe a few samples under each of a span's entities
// for every span of a batch: a lock per sample was a tenth of their cost.
// Until Close, every other call on the Evaluator waits (and one made by the
// holder deadlocks).
type Batch struct{ e *Evaluator }

// Batch holds the evaluator until the returned Batch is closed.
func (e *Evaluator) Batch() Batch {
	e.mu.Lock()
	return Batch{e: e}
}

// ObserveRef is Evaluator.ObserveRef under the batch's hold. sig and s are
// only read: pointers, because this is the span path's innermost call.
func (b Batch) ObserveRef(ref *EntityRef, sig *Signal, s *Sample) bool {
	if !sig.keepsFor(ref, s) {
		return false
	}
	return b.e.observeRefLocked(ref, sig.id, s)
}

// Close releases the evaluator.
func (b Batch) Close() { b.e.mu.Unlock() }

func (e *Evaluator) observeRefLocked(ref *EntityRef, id int, s *Sample) bool {
	st := ref.st
	if st == nil || st.forgotten {
		if st = e.entities[ref.Entity]; st == nil {
			if len(e.entities) >= e.limits.MaxEntities {
				e.dropped++
				return false
			}
			st = &entityState{}
			e.entities[ref.Entity] = st
		}
		ref.st = st
	}
	if !st.changed {
		st.changed = true
		e.changed = append(e.changed, changedEntity{ent: ref.Entity, st: st})
	}
	return e.observeLocked(st, id, s)
}

// observeLocked keeps s in the entity's series of signal id. e.mu is held.
func (e *Evaluator) observeLocked(st *entityState, id int, s *Sample) bool {
	if s.At.After(st.lastSeen) {
		st.lastSeen = s.At
	}
	sr := st.get(id)
	if sr == nil {
		if id >= len(st.series) {
			st.series = append(st.series, make([]*series, id+1-len(st.series))...)
		}
		sr = &series{keep: e.keep[id]}
		st.series[id] = sr
	}
	inOrder := !s.At.Before(sr.lastSeen) // no kept sample is later than s
	if s.At.After(sr.lastSeen) {
		sr.lastSeen = s.At
	}
	at := nanos(s.At)
	p := point{value: s.Value, at: at, traceID: s.TraceID, spanID: s.SpanID}
	if !s.DataTime.IsZero() && !s.DataTime.Equal(s.At) {
		p.data = nanos(s.DataTime)
	}
	if !s.Onset.IsZero() {
		p.onset = nanos(s.Onset)
	}
	if s.Text == "" && !math.IsNaN(s.Value) && !math.IsInf(s.Value, 0) {
		p.base, p.baseOK = sr.baseline, sr.baselineN >= e.limits.BaselineMinSamples
		if sr.baselineN == 0 {
			sr.baseline = s.Value
		} else {
			sr.baseline += e.limits.BaselineAlpha * (s.Value - sr.baseline)
		}
		sr.baselineN++
	}
	// Insert in time order: pipelines deliver slightly out of order. A
	// sample not older than every one before it (the usual case: lastSeen
	// was at most s.At) goes last without reading the points.
	i := len(sr.points)
	if !inOrder {
		for i > 0 && sr.points[i-1].at > at {
			i--
		}
	}
	if p.text = e.texts.intern(s.Text); p.text != 0 {
		sr.texts++
	}
	sr.insert(i, p)
	sr.trim(at-int64(sr.keep), e.limits.MaxSamplesPerSeries, &e.texts)
	return true
}
