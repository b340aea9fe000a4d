package otlpmap // import "github.com/otelcol-gpu/otelcol-gpu/internal/otlpmap"

import (
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

// MaxDepth bounds the nesting the checks follow: a record's attribute map
// (or a kvlist body) is level 1, a map or array value in it level 2, and so
// on. A value nested deeper is refused (TooDeep): the checks recurse at most
// this far, whatever the input.
const MaxDepth = 16

// smallMap is the most keys a map may have for the checks to compare its
// keys pairwise, without allocating; a bigger map's keys go through a set.
// The agent's own records and a training script's step spans have some
// twenty keys.
const smallMap = 32

// Kind is what makes a map non-canonical.
type Kind uint8

// Kinds of Problem.
const (
	// Canonical: nothing wrong.
	Canonical Kind = iota
	// RepeatedKey: a map names a key twice (or a log record names its
	// event twice, differently: EventName and the event.name attribute).
	RepeatedKey
	// TooDeep: values nested deeper than MaxDepth.
	TooDeep
	// NumKinds is the number of kinds, for arrays indexed by Kind.
	NumKinds
)

// String is the kind's name, as a counter's reason attribute spells it.
func (k Kind) String() string {
	switch k {
	case Canonical:
		return "canonical"
	case RepeatedKey:
		return "repeated_key"
	case TooDeep:
		return "too_deep"
	}
	return "unknown"
}

// Problem is the first thing found wrong in a map, a value or a record.
type Problem struct {
	Kind Kind
	// Key is the key named twice (for TooDeep, the key under which the
	// nesting went too deep; empty in a list). It points into the checked
	// data: clone it to keep it beyond the request.
	Key string
}

// OK reports whether nothing was found wrong.
func (p Problem) OK() bool { return p.Kind == Canonical }

// String describes the problem for a log line.
func (p Problem) String() string {
	switch p.Kind {
	case RepeatedKey:
		return "key " + quote(p.Key) + " repeated"
	case TooDeep:
		return "values nested deeper than " + strconv.Itoa(MaxDepth) + " levels under " + quote(p.Key)
	}
	return p.Kind.String()
}

// maxQuoted bounds the sender's text a description carries.
const maxQuoted = 128

func quote(s string) string {
	if len(s) > maxQuoted {
		s = s[:maxQuoted] + "..."
	}
	return `"` + s + `"`
}

// Map checks an attribute map: every key once, in m and in every map
// nested in its values, nesting no deeper than MaxDepth.
func Map(m pcommon.Map) Problem { return mapAt(m, 1) }

// Value checks a value that may hold maps (a log record's body): every map
// in it is canonical, nesting no deeper than MaxDepth. A kvlist body is
// level 1, like an attribute map.
func Value(v pcommon.Value) Problem { return valueAt(v, 0) }

func mapAt(m pcommon.Map, depth int) Problem {
	if depth > MaxDepth {
		return Problem{Kind: TooDeep}
	}
	n := m.Len()
	if n == 0 {
		return Problem{}
	}
	if n > smallMap {
		return bigMapAt(m, n, depth)
	}
	var keys [smallMap]string
	i := 0
	var found Problem
	m.Range(func(k string, v pcommon.Value) bool {
		for _, prev := range keys[:i] {
			if prev == k {
				found = Problem{Kind: RepeatedKey, Key: k}
				return false
			}
		}
		keys[i] = k
		i++
		if !container(v) {
			return true
		}
		found = nested(k, v, depth)
		return found.OK()
	})
	return found
}

// container: v may hold maps (the check looks into maps and lists only).
func container(v pcommon.Value) bool {
	t := v.Type()
	return t == pcommon.ValueTypeMap || t == pcommon.ValueTypeSlice
}

// bigMapAt is mapAt for a map of more than smallMap keys: a set of its
// keys, the one allocation the checks make.
func bigMapAt(m pcommon.Map, n, depth int) Problem {
	seen := make(map[string]struct{}, n)
	var found Problem
	m.Range(func(k string, v pcommon.Value) bool {
		if _, dup := seen[k]; dup {
			found = Problem{Kind: RepeatedKey, Key: k}
			return false
		}
		seen[k] = struct{}{}
		if !container(v) {
			return true
		}
		found = nested(k, v, depth)
		return found.OK()
	})
	return found
}

// nested checks the value of key k of a map at depth.
func nested(k string, v pcommon.Value, depth int) Problem {
	p := valueAt(v, depth)
	if p.Kind == TooDeep && p.Key == "" {
		p.Key = k
	}
	return p
}

// valueAt checks v, a value inside a container at depth (0: none).
func valueAt(v pcommon.Value, depth int) Problem {
	switch v.Type() {
	case pcommon.ValueTypeMap:
		return mapAt(v.Map(), depth+1)
	case pcommon.ValueTypeSlice:
		s := v.Slice()
		if s.Len() == 0 {
			return Problem{}
		}
		if depth+1 > MaxDepth {
			return Problem{Kind: TooDeep}
		}
		for i := 0; i < s.Len(); i++ {
			if p := valueAt(s.At(i), depth+1); !p.OK() {
				return p
			}
		}
	}
	return Problem{}
}

// LogRecord checks a log record: its attributes, its body, and that its
// EventName and event.name attribute, when it has both, are the same
// string (the correlator, nodestate and the rate limiter read either; a
// record naming two events is refused as naming event.name twice).
func LogRecord(lr plog.LogRecord) Problem {
	attrs := lr.Attributes()
	if p := Map(attrs); !p.OK() {
		return p
	}
	if p := Value(lr.Body()); !p.OK() {
		return p
	}
	if name := lr.EventName(); name != "" {
		if v, ok := attrs.Get(semconv.AttrEventName); ok && (v.Type() != pcommon.ValueTypeStr || v.Str() != name) {
			return Problem{Kind: RepeatedKey, Key: semconv.AttrEventName}
		}
	}
	return Problem{}
}

// Span checks a span's attributes and those of its events and links.
func Span(sp ptrace.Span) Problem {
	if p := Map(sp.Attributes()); !p.OK() {
		return p
	}
	events := sp.Events()
	for i := 0; i < events.Len(); i++ {
		if p := Map(events.At(i).Attributes()); !p.OK() {
			return p
		}
	}
	links := sp.Links()
	for i := 0; i < links.Len(); i++ {
		if p := Map(links.At(i).Attributes()); !p.OK() {
			return p
		}
	}
	return Problem{}
}

// NumberDataPoint checks a gauge's or sum's point: its attributes and its
// exemplars'.
func NumberDataPoint(dp pmetric.NumberDataPoint) Problem {
	if p := Map(dp.Attributes()); !p.OK() {
		return p
	}
	return exemplars(dp.Exemplars())
}

// HistogramDataPoint checks a histogram's point and its exemplars.
func HistogramDataPoint(dp pmetric.HistogramDataPoint) Problem {
	if p := Map(dp.Attributes()); !p.OK() {
		return p
	}
	return exemplars(dp.Exemplars())
}

// ExponentialHistogramDataPoint checks an exponential histogram's point and
// its exemplars.
func ExponentialHistogramDataPoint(dp pmetric.ExponentialHistogramDataPoint) Problem {
	if p := Map(dp.Attributes()); !p.OK() {
		return p
	}
	return exemplars(dp.Exemplars())
}

// SummaryDataPoint checks a summary's point.
func SummaryDataPoint(dp pmetric.SummaryDataPoint) Problem {
	return Map(dp.Attributes())
}

func exemplars(es pmetric.ExemplarSlice) Problem {
	for i := 0; i < es.Len(); i++ {
		if p := Map(es.At(i).FilteredAttributes()); !p.OK() {
			return p
		}
	}
	return Problem{}
}
