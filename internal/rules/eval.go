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
	MaxEntities         int           // entities tracked at once (default 100,000); new ones beyond are dropped
	MaxSamplesPerSeries int           // samples kept per entity and signal (default 256); the oldest go first
	ForgetAfter         time.Duration // an entity silent this long is forgotten (default 1 h); absent rules fire until then
	BaselineAlpha       float64       // weight of a new sample in the rolling baseline (default 0.05)
	BaselineMinSamples  int           // samples before a baseline counts (default 5)
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
	Since       time.Time // earliest supporting sample in the window
	At          time.Time // latest supporting sample
	Evidence    []fault.Evidence
}

// Evaluator keeps a sliding window of samples per entity and signal and
// evaluates the rules over them. Safe for concurrent use.
type Evaluator struct {
	rules  []Rule
	byKind map[fault.EntityKind][]int
	keep   map[string]time.Duration // per signal: the longest window of a rule reading it
	limits Limits

	mu       sync.Mutex
	entities map[fault.Entity]*entityState
	dropped  uint64
}

type entityState struct {
	series   map[string]*series
	lastSeen time.Time
}

type point struct {
	value   float64
	text    string
	at      time.Time
	base    float64 // the rolling baseline before this sample
	baseOK  bool
	traceID pcommon.TraceID
	spanID  pcommon.SpanID
}

type series struct {
	points    []point // ordered by time
	lastSeen  time.Time
	baseline  float64
	baselineN int
}

// NewEvaluator returns an evaluator for rules (disabled rules are skipped;
// callers validate with Load first).
func NewEvaluator(rules []Rule, limits Limits) *Evaluator {
	e := &Evaluator{
		byKind:   map[fault.EntityKind][]int{},
		keep:     map[string]time.Duration{},
		limits:   limits.withDefaults(),
		entities: map[fault.Entity]*entityState{},
	}
	for _, r := range rules {
		if r.Disabled {
			continue
		}
		e.byKind[r.Entity] = append(e.byKind[r.Entity], len(e.rules))
		e.rules = append(e.rules, r)
		for _, c := range append(append([]Condition{}, r.All...), r.Any...) {
			if r.Window > e.keep[c.Signal] {
				e.keep[c.Signal] = r.Window
			}
		}
	}
	return e
}

// Observe records a numeric sample. See ObserveSample.
func (e *Evaluator) Observe(entity fault.Entity, signal string, value float64, at time.Time) bool {
	return e.ObserveSample(entity, Sample{Signal: signal, Value: value, At: at})
}

// ObserveSample records s for entity. It returns false when the sample was
// not kept: no rule reads the signal, or the entity limit is reached.
func (e *Evaluator) ObserveSample(entity fault.Entity, s Sample) bool {
	keep, used := e.keep[s.Signal]
	if !used {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	st := e.entities[entity]
	if st == nil {
		if len(e.entities) >= e.limits.MaxEntities {
			e.dropped++
			return false
		}
		st = &entityState{series: map[string]*series{}}
		e.entities[entity] = st
	}
	if s.At.After(st.lastSeen) {
		st.lastSeen = s.At
	}
	sr := st.series[s.Signal]
	if sr == nil {
		sr = &series{}
		st.series[s.Signal] = sr
	}
	if s.At.After(sr.lastSeen) {
		sr.lastSeen = s.At
	}
	p := point{value: s.Value, text: s.Text, at: s.At, traceID: s.TraceID, spanID: s.SpanID}
	if s.Text == "" && !math.IsNaN(s.Value) && !math.IsInf(s.Value, 0) {
		p.base, p.baseOK = sr.baseline, sr.baselineN >= e.limits.BaselineMinSamples
		if sr.baselineN == 0 {
			sr.baseline = s.Value
		} else {
			sr.baseline += e.limits.BaselineAlpha * (s.Value - sr.baseline)
		}
		sr.baselineN++
	}
	// Insert in time order: pipelines deliver slightly out of order.
	i := len(sr.points)
	for i > 0 && sr.points[i-1].at.After(s.At) {
		i--
	}
	sr.points = append(sr.points, point{})
	copy(sr.points[i+1:], sr.points[i:])
	sr.points[i] = p
	sr.expire(s.At.Add(-keep), e.limits.MaxSamplesPerSeries)
	return true
}

// expire drops samples before cutoff and the oldest beyond max.
func (sr *series) expire(cutoff time.Time, max int) {
	n := 0
	for n < len(sr.points) && sr.points[n].at.Before(cutoff) {
		n++
	}
	if over := len(sr.points) - n - max; over > 0 {
		n += over
	}
	if n > 0 {
		sr.points = append(sr.points[:0], sr.points[n:]...)
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
	for ent, st := range e.entities {
		if st.lastSeen.Before(now.Add(-e.limits.ForgetAfter)) {
			delete(e.entities, ent)
			continue
		}
		for sig, sr := range st.series {
			sr.expire(now.Add(-e.keep[sig]), e.limits.MaxSamplesPerSeries)
		}
		for _, ri := range e.byKind[ent.Kind] {
			if m, ok := e.rules[ri].evaluate(ent, st, now); ok {
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
		return out[i].Entity.String() < out[j].Entity.String()
	})
	return out
}

func (r Rule) evaluate(ent fault.Entity, st *entityState, now time.Time) (Match, bool) {
	m := Match{Rule: r.Name, FaultType: r.FaultType, Severity: r.Severity, Action: r.Action,
		BlastRadius: r.BlastRadius, Confidence: r.Confidence, Entity: ent}
	from := now.Add(-r.Window)
	add := func(evs []fault.Evidence) {
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
	for _, c := range r.All {
		evs, ok := c.holds(st.series[c.Signal], from, now)
		if !ok {
			return Match{}, false
		}
		add(evs)
	}
	if len(r.Any) > 0 {
		anyHeld := false
		for _, c := range r.Any {
			if evs, ok := c.holds(st.series[c.Signal], from, now); ok {
				anyHeld = true
				add(evs)
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
// evidence that supports it.
func (c Condition) holds(sr *series, from, now time.Time) ([]fault.Evidence, bool) {
	if c.Agg == AggAbsent {
		if sr == nil || !sr.lastSeen.Before(from) {
			return nil, false
		}
		return []fault.Evidence{{Signal: c.Signal, Value: now.Sub(sr.lastSeen).Seconds(), Time: sr.lastSeen}}, true
	}
	var ws []point
	if sr != nil {
		for i, p := range sr.points {
			if !p.at.Before(from) && !p.at.After(now) {
				ws = append(ws, sr.points[i])
			}
		}
	}
	need := c.MinSamples
	if need < 1 {
		need = 1
	}
	if len(ws) < need {
		return nil, c.PassIfMissing && len(ws) == 0
	}
	evidence := func(p point, v float64) []fault.Evidence {
		return []fault.Evidence{{Signal: c.Signal, Value: v, Text: p.text, Time: p.at, TraceID: p.traceID, SpanID: p.spanID}}
	}

	if len(c.In) > 0 {
		for i := len(ws) - 1; i >= 0; i-- {
			if c.inSet(ws[i]) {
				return evidence(ws[i], ws[i].value), true
			}
		}
		return nil, false
	}
	if c.Op == OpNaN {
		for i := len(ws) - 1; i >= 0; i-- {
			if ws[i].text == "" && (math.IsNaN(ws[i].value) || math.IsInf(ws[i].value, 0)) {
				return evidence(ws[i], ws[i].value), true
			}
		}
		return nil, false
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
			span := last.at.Sub(ws[0].at).Seconds()
			if span <= 0 {
				return nil, false
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
			return nil, c.PassIfMissing
		}
	default: // last
		x = last.value
	}
	if !c.Op.compare(x, *c.Value) {
		return nil, false
	}
	return evidence(at, x), true
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

func (c Condition) inSet(p point) bool {
	for _, v := range c.In {
		if s, ok := v.(string); ok {
			if p.text == s {
				return true
			}
			continue
		}
		if n, ok := c.inNumber(v); ok && p.text == "" && p.value == n {
			return true
		}
	}
	return false
}
