package steprecord

import "go.opentelemetry.io/collector/pdata/pcommon"

// Phase indexes Attrs.Phases, in the contract's order.
type Phase uint8

// The contract's phases.
const (
	PhaseDataload Phase = iota
	PhaseForward
	PhaseBackward
	PhaseOptimizer
	NumPhases
)

// Attrs is a step record read in one pass over each of its maps: the
// span's (fromSpan) and its resource's. It keeps who the rank is and what
// the straggler decision reads (the fields up to FieldCollectivesTailNs);
// the other fields' values are read where they are used, from the key
// FieldOf classifies. A field holds a value only when Has says so; the
// strings point into the maps read, so a caller that keeps one beyond the
// batch clones it. Reading allocates nothing.
type Attrs struct {
	// Arrays indexed by field, so that reading a value is one branch on
	// its kind (strings, the stage, integers), not a switch on the field.
	strs  [FieldStage - FieldJob + 1]string
	ints  [lastKept - FieldAttempt + 1]int64
	found Fields // read with the contract's type
	wrong Fields // present with another type (and not found elsewhere)
}

// Job is training.job.id.
func (a *Attrs) Job() string { return a.str(FieldJob) }

// Host is host.name.
func (a *Attrs) Host() string { return a.str(FieldHost) }

// GPU is gpu.uuid.
func (a *Attrs) GPU() string { return a.str(FieldGPU) }

// Stage is training.pp_stage as a group name (Stage): "3", or the script's
// own name.
func (a *Attrs) Stage() string { return a.str(FieldStage) }

// str is a string field's value (FieldJob to FieldStage).
func (a *Attrs) str(f Field) string { return a.strs[f-FieldJob] }

// Int is the value of an integer field (FieldAttempt to
// FieldCollectivesTailNs), 0 when absent.
func (a *Attrs) Int(f Field) int64 {
	if f < FieldAttempt || f > lastKept {
		return 0
	}
	return a.ints[f-FieldAttempt]
}

// Phase is a phase's duration in ns as sent (a negative one too).
func (a *Attrs) Phase(p Phase) int64 { return a.ints[p.Field()-FieldAttempt] }

// Read reads a train.step span's attributes and its resource's.
func Read(span, resource pcommon.Map) Attrs {
	var a, res Attrs
	a.Read(span, true)
	res.Read(resource, false)
	a.Inherit(&res)
	return a
}

// Read takes every attribute of m that belongs to the record (Take).
func (a *Attrs) Read(m pcommon.Map, fromSpan bool) {
	for k, v := range m.All() {
		if f := FieldOf(k); f != FieldNone && f <= lastKept && (fromSpan || f.OnResource()) {
			a.put(f, v)
		}
	}
}

// Take reads one attribute into a: from a resource (fromSpan false) only
// who the rank is (Field.OnResource). It reports whether k is the record's,
// so that a caller's own loop over a map can look at the other keys. Read
// each map into an Attrs of its own, then Inherit the resource's: within
// one Attrs the first value of a field is kept (put).
func (a *Attrs) Take(k string, v pcommon.Value, fromSpan bool) bool {
	f := FieldOf(k)
	if f == FieldNone {
		return false
	}
	if f <= lastKept && (fromSpan || f.OnResource()) {
		a.put(f, v)
	}
	return true
}

// put stores v in f's field, or notes that f came with the wrong type. A
// field read already keeps its value: a key's first entry in a map is its
// value, the one pcommon.Map.Get returns and the provenance processor
// judged (a map that names a key twice never passes an agent's OTLP edge;
// one from elsewhere is read the same way by every reader, issue 29).
func (a *Attrs) put(f Field, v pcommon.Value) {
	if (a.found | a.wrong).Has(f) {
		return
	}
	if a.set(f, v) {
		a.found |= f.bit()
	} else {
		a.wrong |= f.bit()
	}
}

// set stores v in f's field when it has the contract's type.
func (a *Attrs) set(f Field, v pcommon.Value) (ok bool) {
	switch {
	case f < FieldStage:
		if ok = v.Type() == pcommon.ValueTypeStr; ok {
			a.strs[f-FieldJob] = v.Str()
		}
	case f == FieldStage:
		a.strs[f-FieldJob], ok = Stage(v)
	default:
		a.ints[f-FieldAttempt], ok = Int(v)
	}
	return ok
}

// Inherit takes from res, the span's resource read with fromSpan false, the
// fields the span lacked.
func (a *Attrs) Inherit(res *Attrs) {
	missing := res.found &^ a.found
	a.wrong = (a.wrong | res.wrong) &^ (a.found | missing)
	if missing == 0 {
		return
	}
	for f := FieldJob; f <= FieldStage; f++ {
		if missing.Has(f) {
			a.strs[f-FieldJob] = res.strs[f-FieldJob]
		}
	}
	for f := FieldAttempt; f <= FieldLocalRank; f++ {
		if missing.Has(f) {
			a.ints[f-FieldAttempt] = res.ints[f-FieldAttempt]
		}
	}
	a.found |= missing
}

// Found is the set of fields read with the contract's type.
func (a *Attrs) Found() Fields { return a.found }

// Has reports whether f was read with the contract's type.
func (a *Attrs) Has(f Field) bool { return a.found.Has(f) }

// Wrong is the set of fields present only with another type than the
// contract's: ignored, and the reason a required one is missing.
func (a *Attrs) Wrong() Fields { return a.wrong }

// Identity is the record's identity, or an *Error naming the attribute
// that leaves it without one: the job must be a non-empty string, the step
// and the rank non-negative integers, the attempt, when present, too.
func (a *Attrs) Identity() (Identity, error) {
	for _, f := range [...]Field{FieldJob, FieldStep, FieldRank} {
		if !a.found.Has(f) {
			if a.wrong.Has(f) {
				return Identity{}, errorOf(f, ReasonType)
			}
			return Identity{}, errorOf(f, ReasonMissing)
		}
	}
	job, step, rank, attempt := a.Job(), a.Int(FieldStep), a.Int(FieldRank), a.Int(FieldAttempt)
	switch {
	case job == "":
		return Identity{}, errorOf(FieldJob, ReasonEmpty)
	case step < 0:
		return Identity{}, errorOf(FieldStep, ReasonNegative)
	case rank < 0:
		return Identity{}, errorOf(FieldRank, ReasonNegative)
	case a.wrong.Has(FieldAttempt):
		// a garbage attempt must not merge into attempt 0
		return Identity{}, errorOf(FieldAttempt, ReasonType)
	case attempt < 0:
		return Identity{}, errorOf(FieldAttempt, ReasonNegative)
	}
	return Identity{Job: job, Attempt: attempt, Step: step, Rank: rank}, nil
}

// Field is the phase's field.
func (p Phase) Field() Field { return FieldPhaseDataload + Field(p) }
