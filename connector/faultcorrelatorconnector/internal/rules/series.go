package rules

import (
	"sort"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

// entityState is what the evaluator keeps of one entity: its series.
type entityState struct {
	series   []*series // by signal id; nil where not observed
	lastSeen time.Time
	// forgotten: Evaluate dropped the entity; an EntityRef holding this
	// state looks the entity up again.
	forgotten bool
	// changed: a sample arrived since the entity was last evaluated (it is
	// in Evaluator.changed).
	changed bool
}

// get returns the entity's series of signal id, or nil.
func (st *entityState) get(id int) *series {
	if id < len(st.series) {
		return st.series[id]
	}
	return nil
}

// point is one kept sample. It holds no pointer (the times as Unix
// nanoseconds, the text as an id of Evaluator.texts), so the series arrays
// are never scanned by the garbage collector, and it is 72 bytes instead of
// the 136 of three time.Times and a string.
type point struct {
	at      int64 // Unix nanoseconds: where the sample sits in the windows (Sample.At)
	data    int64 // Sample.DataTime in Unix nanoseconds; 0 when it is at
	onset   int64 // Sample.Onset in Unix nanoseconds; 0 when none
	value   float64
	base    float64 // the rolling baseline before this sample
	traceID pcommon.TraceID
	spanID  pcommon.SpanID
	text    uint32 // Evaluator.texts id; 0 for a numeric sample
	baseOK  bool
}

// time returns when p's reading was taken (its data time).
func (p point) time() time.Time { return time.Unix(0, p.dataNanos()).UTC() }

// dataNanos is p's data time in Unix nanoseconds.
func (p point) dataNanos() int64 {
	if p.data != 0 {
		return p.data
	}
	return p.at
}

// observedAt returns where p sits in the windows when that is not its data
// time (a span reading placed at its arrival), else zero: Evidence.ObservedAt.
func (p point) observedAt() time.Time {
	if p.data == 0 {
		return time.Time{}
	}
	return time.Unix(0, p.at).UTC()
}

// onsetTime returns the onset p reports, or zero.
func (p point) onsetTime() time.Time {
	if p.onset == 0 {
		return time.Time{}
	}
	return time.Unix(0, p.onset).UTC()
}

// evidence is p as evidence of signal with value v.
func (p point) evidence(signal string, v float64, texts *textTable) fault.Evidence {
	return fault.Evidence{Signal: signal, Value: v, Text: texts.text(p.text), Time: p.time(),
		ObservedAt: p.observedAt(), TraceID: p.traceID, SpanID: p.spanID}
}

// nanos is t as point.at.
func nanos(t time.Time) int64 { return t.UnixNano() }

// series is the kept samples of one signal of one entity and the signal's
// rolling baseline there.
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
