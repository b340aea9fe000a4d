package rules

import (
	"math"
	"sort"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

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
	Since       time.Time     // earliest supporting sample in the window (its data time)
	At          time.Time     // latest supporting sample (its data time)
	// Onset is the earliest onset the supporting samples report (a
	// straggler verdict's first flagged step, straggler.onset_unix_nano),
	// zero when none does: the correlator opens the fault there rather
	// than at Since, the step that confirmed it.
	Onset    time.Time
	Evidence []fault.Evidence
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
	e.changed = e.changed[:0]
	for ent, st := range e.entities {
		st.changed = false
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
		out = e.evaluateEntity(out, ent, st, now)
	}
	e.sortMatches(out)
	return out
}

// EvaluateChanged is Evaluate over only the entities that received a
// sample since they were last evaluated (by either call): what an input
// can have changed, at a cost in proportion to it. A rule reads only its
// entity's samples, so their matches are those Evaluate would return.
// Expiry is left to Evaluate.
func (e *Evaluator) EvaluateChanged(now time.Time) []Match {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []Match
	for _, c := range e.changed {
		if c.st.forgotten {
			continue
		}
		c.st.changed = false
		out = e.evaluateEntity(out, c.ent, c.st, now)
	}
	e.changed = e.changed[:0]
	e.sortMatches(out)
	return out
}

// changedEntity is an entity in Evaluator.changed with its state, so that
// EvaluateChanged does not look it up again: a map look-up per changed
// entity per evaluation was a third of its cost on a gateway (BENCHMARKS.md,
// "Gateway overhead"). The state is the entity's in e.entities: a state is
// replaced only after Evaluate forgot it (forgotten) and emptied changed.
type changedEntity struct {
	ent fault.Entity
	st  *entityState
}

// evaluateEntity appends the matches of the rules on ent's kind.
func (e *Evaluator) evaluateEntity(out []Match, ent fault.Entity, st *entityState, now time.Time) []Match {
	for _, ri := range e.byKind[ent.Kind] {
		if m, ok := e.rules[ri].evaluate(e.conds[ri], ent, st, now, &e.texts); ok {
			out = append(out, m)
		}
	}
	return out
}

// sortMatches orders matches by rule (configuration order) and entity.
func (e *Evaluator) sortMatches(out []Match) {
	if len(out) < 2 {
		return
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
}

// observed reports whether st has what c reads: a cheap test that spares
// most rules of most entities (an XID rule on a GPU without XIDs) the work.
func (c *Condition) observed(sr *series) bool {
	switch {
	case c.PassIfMissing:
		return true
	case c.Agg == AggAbsent:
		return sr != nil
	}
	return sr != nil && len(sr.points) > 0
}

func (r *Rule) evaluate(cr compiledRule, ent fault.Entity, st *entityState, now time.Time, texts *textTable) (Match, bool) {
	// By index: a Condition is too large to copy for a test this cheap.
	for i := range r.All {
		if !r.All[i].observed(st.get(cr.all[i])) {
			return Match{}, false
		}
	}
	if len(r.Any) > 0 {
		some := false
		for i := range r.Any {
			some = some || r.Any[i].observed(st.get(cr.any[i]))
		}
		if !some {
			return Match{}, false
		}
	}
	m := Match{Rule: r.Name, FaultType: r.FaultType, Severity: r.Severity, Action: r.Action,
		BlastRadius: r.BlastRadius, Confidence: r.Confidence, Entity: ent, Window: r.Window}
	from := now.Add(-r.Window)
	add := func(evs []fault.Evidence, latest, onset time.Time) {
		if !onset.IsZero() && (m.Onset.IsZero() || onset.Before(m.Onset)) {
			m.Onset = onset
		}
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
		evs, latest, onset, ok := c.holds(st.get(cr.all[i]), from, now, texts)
		if !ok {
			return Match{}, false
		}
		add(evs, latest, onset)
	}
	if len(r.Any) > 0 {
		anyHeld := false
		for i, c := range r.Any {
			if evs, latest, onset, ok := c.holds(st.get(cr.any[i]), from, now, texts); ok {
				anyHeld = true
				add(evs, latest, onset)
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

// holds tests c over the samples of sr in [from, now] (where the samples
// sit in the windows: Sample.At) and returns the evidence that supports
// it, the data time of the latest supporting sample and the earliest onset
// the supporting samples report (zero when none). A match condition (in,
// nan) gives the matching sample with the earliest data time as its
// evidence: the onset, which stays put as later samples arrive, so that
// replicas that evaluate at other moments agree on it.
func (c Condition) holds(sr *series, from, now time.Time, texts *textTable) ([]fault.Evidence, time.Time, time.Time, bool) {
	var none time.Time
	if c.Agg == AggAbsent {
		if sr == nil || !sr.lastSeen.Before(from) {
			return nil, none, none, false
		}
		return []fault.Evidence{{Signal: c.Signal, Value: now.Sub(sr.lastSeen).Seconds(), Time: sr.lastSeen}}, sr.lastSeen, none, true
	}
	var ws []point
	if sr != nil {
		ws = sr.within(nanos(from), nanos(now))
	}
	need := max(c.MinSamples, c.LastSamples, 1)
	if len(ws) < need {
		return nil, none, none, c.PassIfMissing && len(ws) == 0
	}
	if c.LastSamples > 0 {
		ws = ws[len(ws)-c.LastSamples:]
	}
	evidence := func(p point, v float64) []fault.Evidence {
		return []fault.Evidence{p.evidence(c.Signal, v, texts)}
	}

	if len(c.In) > 0 || c.Op == OpNaN {
		// The earliest and latest by data time: window order is data
		// order unless samples were placed at their arrival
		// (Sample.DataTime), and the onset is when it happened, not when
		// it arrived.
		first := -1
		var latest, onset int64
		for i, p := range ws {
			if c.matches(p, texts) {
				if first < 0 || p.dataNanos() < ws[first].dataNanos() {
					first = i
				}
				if t := p.dataNanos(); t > latest {
					latest = t
				}
				if p.onset != 0 && (onset == 0 || p.onset < onset) {
					onset = p.onset
				}
			}
		}
		if first < 0 {
			return nil, none, none, false
		}
		return evidence(ws[first], ws[first].value), time.Unix(0, latest).UTC(), point{onset: onset}.onsetTime(), true
	}

	if c.Agg == AggDistinct {
		evs, onset := distinct(c.Signal, ws, texts)
		if !c.Op.compare(float64(len(evs)), *c.Value) {
			return nil, none, none, false
		}
		latest := evs[0].Time
		for _, ev := range evs[1:] {
			if ev.Time.After(latest) {
				latest = ev.Time
			}
		}
		return evs, latest, onset, true
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
				return nil, none, none, false
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
			return nil, none, none, c.PassIfMissing
		}
	default: // last
		x = last.value
	}
	if !c.Op.compare(x, *c.Value) {
		return nil, none, none, false
	}
	return evidence(at, x), at.time(), at.onsetTime(), true
}

// distinct returns one evidence per distinct value in ws (its latest
// sample), oldest first, and the earliest onset they report.
func distinct(signal string, ws []point, texts *textTable) ([]fault.Evidence, time.Time) {
	type key struct {
		text  uint32
		nan   bool
		value float64
	}
	seen := make(map[key]bool, len(ws))
	var out []fault.Evidence
	var onset int64
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
		out = append(out, p.evidence(signal, p.value, texts))
		if p.onset != 0 && (onset == 0 || p.onset < onset) {
			onset = p.onset
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, point{onset: onset}.onsetTime()
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
		if n, ok := Number(v); ok && p.text == 0 && p.value == n {
			return true
		}
	}
	return false
}
