package rules

import (
	"math"
	"sort"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

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

// Sample is one observation of a signal: a number, or a text (Text set) for
// log and span attributes such as straggler.verdict.
type Sample struct {
	Signal  string
	Value   float64
	Text    string
	At      time.Time
	TraceID pcommon.TraceID
	SpanID  pcommon.SpanID
}

// Match is one rule holding for one entity at evaluation time. The
// correlator turns it into a fault record (and keeps the first onset while
// the fault stays open, so that the fault id does not move).
type Match struct {
	Rule        string
	FaultType   fault.Type
	XID         int // the gpu.xid code among the evidence, 0 when none
	Severity    fault.Severity
	Action      fault.Action
	BlastRadius fault.BlastRadius
	Confidence  float64
	Entity      fault.Entity
	Window      time.Duration // the rule's window
	Since       time.Time     // earliest supporting sample in the window
	At          time.Time     // latest supporting sample
	Evidence    []fault.Evidence
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
	texts     textTable // the texts of kept samples
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

type entityState struct {
	series   []*series // by signal id; nil where not observed
	lastSeen time.Time
	// forgotten: Evaluate dropped the entity; an EntityRef holding this
	// state looks the entity up again.
	forgotten bool
}

// get returns the entity's series of signal id, or nil.
func (st *entityState) get(id int) *series {
	if id < len(st.series) {
		return st.series[id]
	}
	return nil
}

// point is one kept sample. It holds no pointer (the time as Unix
// nanoseconds, the text as an id of Evaluator.texts), so the series arrays
// are never scanned by the garbage collector, and it is 56 bytes instead of
// the 88 of a time.Time and a string.
type point struct {
	at      int64 // Unix nanoseconds
	value   float64
	base    float64 // the rolling baseline before this sample
	traceID pcommon.TraceID
	spanID  pcommon.SpanID
	text    uint32 // Evaluator.texts id; 0 for a numeric sample
	baseOK  bool
}

// time returns when p was observed.
func (p point) time() time.Time { return time.Unix(0, p.at).UTC() }

// nanos is t as point.at.
func nanos(t time.Time) int64 { return t.UnixNano() }

type series struct {
	points []point // ordered by time; a window of buf
	// buf is the array points lives in, from its start: trim reslices
	// points forward, and insert moves them back to the start instead of
	// growing a new array when the dropped prefix is as long as they are.
	buf       []point
	lastSeen  time.Time
	keep      time.Duration // samples older than this before the latest go
	baseline  float64
	baselineN int
	oldest    int64 // points[0].at, so that trim need not read the array's cold start
	texts     int   // points with a text, which trim releases
}

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

// insert puts p at index i of the points, reusing the array: when it is
// full and trim freed at least as many samples at its start as there are
// live ones, those move back to the start (amortised: each sample moves at
// most once per sample dropped) instead of append growing a new array for
// every window's worth of samples.
func (sr *series) insert(i int, p point) {
	if n := len(sr.points); n == cap(sr.points) {
		if n > 0 && cap(sr.buf)-cap(sr.points) >= n {
			copy(sr.buf[:n], sr.points)
			sr.points = sr.buf[:n]
		} else {
			grown := make([]point, n, max(2*n, 4))
			copy(grown, sr.points)
			sr.points, sr.buf = grown, grown
		}
	}
	sr.points = append(sr.points, point{})
	copy(sr.points[i+1:], sr.points[i:])
	sr.points[i] = p
	if i == 0 {
		sr.oldest = p.at
	}
}

// trim drops samples before cutoff (Unix nanoseconds) and the oldest
// beyond max, releasing their texts. It drops in steps of about a
// sixteenth: once the oldest sample is that share of the window past the
// cutoff, or the series is over max, down to a sixteenth below max. Most
// inserts then leave the start of the array, which is cold in the cache,
// unread. Rules read their window through within, so the few older
// samples a series holds meanwhile change no result; max stays the bound.
func (sr *series) trim(cutoff int64, max int, texts *textTable) {
	n := len(sr.points)
	if n <= max && (n == 0 || sr.oldest >= cutoff-int64(sr.keep)/16) {
		return
	}
	drop := 0
	for drop < n && sr.points[drop].at < cutoff {
		drop++
	}
	if n-drop > max {
		drop = n - max + max/16 // a step below max, never emptying it
	}
	if drop == 0 {
		return
	}
	sr.releaseTexts(drop, texts)
	// Reslice rather than copy: copying the rest at every step is
	// quadratic. insert moves the live samples back to the start of the
	// array once it is used up.
	sr.points = sr.points[drop:]
	if len(sr.points) > 0 {
		sr.oldest = sr.points[0].at
	}
}

// drop releases every sample of sr.
func (sr *series) drop(texts *textTable) {
	sr.releaseTexts(len(sr.points), texts)
	sr.points, sr.buf = nil, nil
}

// releaseTexts releases the texts of the first n points; a numeric series
// (no texts) is not read.
func (sr *series) releaseTexts(n int, texts *textTable) {
	for i := 0; i < n && sr.texts > 0; i++ {
		if id := sr.points[i].text; id != 0 {
			texts.release(id)
			sr.texts--
		}
	}
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

// Evaluate expires old samples and entities and returns every rule that
// holds at now, ordered by rule (configuration order) and entity.
func (e *Evaluator) Evaluate(now time.Time) []Match {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []Match
	// Observe trims a series as samples arrive; only a series that stopped
	// receiving them still holds samples older than it keeps. Freeing those
	// once a minute is enough and spares every evaluation a pass over them.
	sweep := !now.Before(e.nextSweep)
	if sweep {
		e.nextSweep = now.Add(sweepEvery)
	}
	for ent, st := range e.entities {
		if st.lastSeen.Before(now.Add(-e.ForgetAfter(ent.Kind))) {
			st.forgotten = true
			for _, sr := range st.series {
				if sr != nil {
					sr.drop(&e.texts)
				}
			}
			st.series = nil // an EntityRef may keep st a while
			delete(e.entities, ent)
			continue
		}
		if sweep {
			for _, sr := range st.series {
				if sr != nil && sr.lastSeen.Before(now.Add(-sr.keep)) {
					sr.drop(&e.texts)
				}
			}
		}
		for _, ri := range e.byKind[ent.Kind] {
			if m, ok := e.rules[ri].evaluate(e.conds[ri], ent, st, now, &e.texts); ok {
				out = append(out, m)
			}
		}
	}
	order := make(map[string]int, len(e.rules))
	for i, r := range e.rules {
		order[r.Name] = i
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Rule != out[j].Rule {
			return order[out[i].Rule] < order[out[j].Rule]
		}
		// Kind, then key: the order of Entity.String() (no kind is a prefix
		// of another) without building the strings.
		if out[i].Entity.Kind != out[j].Entity.Kind {
			return out[i].Entity.Kind < out[j].Entity.Kind
		}
		return out[i].Entity.Key < out[j].Entity.Key
	})
	return out
}

// observed reports whether st has what c reads: a cheap test that spares
// most rules of most entities (an XID rule on a GPU without XIDs) the work.
func (c Condition) observed(sr *series) bool {
	switch {
	case c.PassIfMissing:
		return true
	case c.Agg == AggAbsent:
		return sr != nil
	}
	return sr != nil && len(sr.points) > 0
}

func (r Rule) evaluate(cr compiledRule, ent fault.Entity, st *entityState, now time.Time, texts *textTable) (Match, bool) {
	for i, c := range r.All {
		if !c.observed(st.get(cr.all[i])) {
			return Match{}, false
		}
	}
	if len(r.Any) > 0 {
		some := false
		for i, c := range r.Any {
			some = some || c.observed(st.get(cr.any[i]))
		}
		if !some {
			return Match{}, false
		}
	}
	m := Match{Rule: r.Name, FaultType: r.FaultType, Severity: r.Severity, Action: r.Action,
		BlastRadius: r.BlastRadius, Confidence: r.Confidence, Entity: ent, Window: r.Window}
	from := now.Add(-r.Window)
	add := func(evs []fault.Evidence, latest time.Time) {
		if latest.After(m.At) {
			m.At = latest
		}
		for _, ev := range evs {
			if m.Since.IsZero() || ev.Time.Before(m.Since) {
				m.Since = ev.Time
			}
			if ev.Time.After(m.At) {
				m.At = ev.Time
			}
			if ev.Signal == fault.AttrGPUXID && m.XID == 0 {
				m.XID = int(ev.Value)
			}
		}
		m.Evidence = append(m.Evidence, evs...)
	}
	for i, c := range r.All {
		evs, latest, ok := c.holds(st.get(cr.all[i]), from, now, texts)
		if !ok {
			return Match{}, false
		}
		add(evs, latest)
	}
	if len(r.Any) > 0 {
		anyHeld := false
		for i, c := range r.Any {
			if evs, latest, ok := c.holds(st.get(cr.any[i]), from, now, texts); ok {
				anyHeld = true
				add(evs, latest)
			}
		}
		if !anyHeld {
			return Match{}, false
		}
	}
	if len(m.Evidence) == 0 {
		return Match{}, false // only pass_if_missing conditions held: nothing observed
	}
	return m, true
}

// holds tests c over the samples of sr in [from, now] and returns the
// evidence that supports it and the time of the latest supporting sample.
// A match condition (in, nan) gives the earliest matching sample as its
// evidence: the onset, which stays put as later samples arrive, so that
// replicas that evaluate at other moments agree on it.
func (c Condition) holds(sr *series, from, now time.Time, texts *textTable) ([]fault.Evidence, time.Time, bool) {
	if c.Agg == AggAbsent {
		if sr == nil || !sr.lastSeen.Before(from) {
			return nil, time.Time{}, false
		}
		return []fault.Evidence{{Signal: c.Signal, Value: now.Sub(sr.lastSeen).Seconds(), Time: sr.lastSeen}}, sr.lastSeen, true
	}
	var ws []point
	if sr != nil {
		ws = sr.within(nanos(from), nanos(now))
	}
	need := max(c.MinSamples, c.LastSamples, 1)
	if len(ws) < need {
		return nil, time.Time{}, c.PassIfMissing && len(ws) == 0
	}
	if c.LastSamples > 0 {
		ws = ws[len(ws)-c.LastSamples:]
	}
	evidence := func(p point, v float64) []fault.Evidence {
		return []fault.Evidence{{Signal: c.Signal, Value: v, Text: texts.text(p.text), Time: p.time(), TraceID: p.traceID, SpanID: p.spanID}}
	}

	if len(c.In) > 0 || c.Op == OpNaN {
		first, last := -1, -1
		for i, p := range ws {
			if c.matches(p, texts) {
				if first < 0 {
					first = i
				}
				last = i
			}
		}
		if first < 0 {
			return nil, time.Time{}, false
		}
		return evidence(ws[first], ws[first].value), ws[last].time(), true
	}

	if c.Agg == AggDistinct {
		evs := distinct(c.Signal, ws, texts)
		if !c.Op.compare(float64(len(evs)), *c.Value) {
			return nil, time.Time{}, false
		}
		return evs, evs[len(evs)-1].Time, true
	}

	last := ws[len(ws)-1]
	at := last
	var x float64
	switch c.Agg {
	case AggMin, AggMax:
		x = last.value
		for _, p := range ws {
			if (c.Agg == AggMin && p.value < x) || (c.Agg == AggMax && p.value > x) {
				x, at = p.value, p
			}
		}
	case AggMean:
		for _, p := range ws {
			x += p.value
		}
		x /= float64(len(ws))
	case AggCount:
		x = float64(len(ws))
	case AggDelta, AggRate:
		x = counterGrowth(ws)
		if c.Agg == AggRate {
			span := time.Duration(last.at - ws[0].at).Seconds()
			if span <= 0 {
				return nil, time.Time{}, false
			}
			x /= span
		}
	case AggBaselineRatio:
		found := false
		for _, p := range ws {
			if !p.baseOK || p.base <= 0 {
				continue
			}
			if ratio := p.value / p.base; !found || ratio > x {
				x, at, found = ratio, p, true
			}
		}
		if !found {
			return nil, time.Time{}, c.PassIfMissing
		}
	default: // last
		x = last.value
	}
	if !c.Op.compare(x, *c.Value) {
		return nil, time.Time{}, false
	}
	return evidence(at, x), at.time(), true
}

// within returns the samples in [from, now] (Unix nanoseconds), without
// copying: points are in time order, so two binary searches bound them.
func (sr *series) within(from, now int64) []point {
	n := len(sr.points)
	if n == 0 || (sr.points[0].at >= from && sr.points[n-1].at <= now) {
		return sr.points // the usual case: the series keeps just the window
	}
	lo := sort.Search(len(sr.points), func(i int) bool { return sr.points[i].at >= from })
	hi := sort.Search(len(sr.points), func(i int) bool { return sr.points[i].at > now })
	if lo >= hi {
		return nil
	}
	return sr.points[lo:hi]
}

// distinct returns one evidence per distinct value in ws (its latest
// sample), oldest first.
func distinct(signal string, ws []point, texts *textTable) []fault.Evidence {
	type key struct {
		text  uint32
		nan   bool
		value float64
	}
	seen := make(map[key]bool, len(ws))
	var out []fault.Evidence
	for i := len(ws) - 1; i >= 0; i-- {
		p := ws[i]
		k := key{text: p.text}
		switch {
		case p.text != 0:
		case math.IsNaN(p.value): // NaN is not equal to itself: one key for all
			k.nan = true
		default:
			k.value = p.value
		}
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, fault.Evidence{Signal: signal, Value: p.value, Text: texts.text(p.text), Time: p.time(), TraceID: p.traceID, SpanID: p.spanID})
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// counterGrowth sums the increases between consecutive samples; a drop is a
// counter reset (driver reload, exporter restart), after which the new value
// is the growth since the reset.
func counterGrowth(ws []point) float64 {
	g := 0.0
	for i := 1; i < len(ws); i++ {
		d := ws[i].value - ws[i-1].value
		if d < 0 {
			d = ws[i].value
		}
		if !math.IsNaN(d) {
			g += d
		}
	}
	return g
}

// matches reports whether p is a sample an in: or op: nan condition
// looks for.
func (c Condition) matches(p point, texts *textTable) bool {
	if c.Op == OpNaN {
		return p.text == 0 && (math.IsNaN(p.value) || math.IsInf(p.value, 0))
	}
	return c.inSet(p, texts)
}

func (c Condition) inSet(p point, texts *textTable) bool {
	for _, v := range c.In {
		if s, ok := v.(string); ok {
			if p.text != 0 && texts.text(p.text) == s {
				return true
			}
			continue
		}
		if n, ok := c.inNumber(v); ok && p.text == 0 && p.value == n {
			return true
		}
	}
	return false
}
