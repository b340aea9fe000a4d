package otlpmap

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-gpu/otelcol-gpu/internal/otlpmap/otlpmaptest"
)

var rep = otlpmaptest.Repeat

// withKeys puts n distinct keys k0..k<n-1> into m.
func withKeys(m pcommon.Map, n int) {
	for i := range n {
		m.PutInt("k"+strconv.Itoa(i), int64(i))
	}
}

func TestMap(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(m pcommon.Map)
		want  Problem
	}{
		{"empty", func(pcommon.Map) {}, Problem{}},
		{"distinct keys", func(m pcommon.Map) { withKeys(m, 20) }, Problem{}},
		{"a big map's distinct keys", func(m pcommon.Map) { withKeys(m, 3*smallMap) }, Problem{}},
		{"host.name twice", func(m pcommon.Map) {
			m.PutStr("host.name", "node-a")
			m.PutStr("gpu.uuid", "GPU-a")
			m.PutStr(rep("host.name"), "node-victim")
		}, Problem{Kind: RepeatedKey, Key: "host.name"}},
		{"the same value twice", func(m pcommon.Map) {
			m.PutStr("host.name", "node-a")
			m.PutStr(rep("host.name"), "node-a")
		}, Problem{Kind: RepeatedKey, Key: "host.name"}},
		{"a key three times", func(m pcommon.Map) {
			m.PutStr("event.name", "step.note")
			m.PutStr(rep("event.name"), "step.note")
			m.PutStr(rep("event.name"), "gpu.unresponsive")
		}, Problem{Kind: RepeatedKey, Key: "event.name"}},
		{"a key repeated in a big map, last", func(m pcommon.Map) {
			withKeys(m, 2*smallMap)
			m.PutStr(rep("k0"), "again")
		}, Problem{Kind: RepeatedKey, Key: "k0"}},
		{"a key repeated in a kvlist value", func(m pcommon.Map) {
			m.PutStr("service.name", "train.py")
			ev := m.PutEmptyMap("nccl.evidence")
			ev.PutStr("rank.3.stuck_collective", "a")
			ev.PutStr(rep("rank.3.stuck_collective"), "b")
		}, Problem{Kind: RepeatedKey, Key: "rank.3.stuck_collective"}},
		{"a key repeated in a map in a list", func(m pcommon.Map) {
			s := m.PutEmptySlice("list")
			s.AppendEmpty().SetStr("x")
			in := s.AppendEmpty().SetEmptyMap()
			in.PutStr("host.name", "a")
			in.PutStr(rep("host.name"), "b")
		}, Problem{Kind: RepeatedKey, Key: "host.name"}},
		{"the same key in two maps is no repeat", func(m pcommon.Map) {
			m.PutStr("host.name", "a")
			m.PutEmptyMap("inner").PutStr("host.name", "b")
		}, Problem{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := otlpmaptest.Map(tc.build)
			assert.Equal(t, tc.want, Map(m))
		})
	}
}

// nest puts depth levels of maps (the outer map is level 1) under key
// "deep", the innermost holding leaf.
func nest(m pcommon.Map, depth int, list bool) {
	for level := 2; level <= depth; level++ {
		if list && level%2 == 0 {
			s := m.PutEmptySlice("deep")
			if level == depth {
				s.AppendEmpty().SetStr("leaf")
				return
			}
			level++
			m = s.AppendEmpty().SetEmptyMap()
			if level == depth {
				m.PutStr("leaf", "x")
				return
			}
			continue
		}
		m = m.PutEmptyMap("deep")
	}
	m.PutStr("leaf", "x")
}

func TestMapDepth(t *testing.T) {
	for _, list := range []bool{false, true} {
		m := pcommon.NewMap()
		nest(m, MaxDepth, list)
		assert.Equal(t, Problem{}, Map(m), "MaxDepth levels (lists %v)", list)

		m = pcommon.NewMap()
		nest(m, MaxDepth+1, list)
		assert.Equal(t, Problem{Kind: TooDeep, Key: "deep"}, Map(m), "MaxDepth+1 levels (lists %v)", list)
	}
	// Far deeper than the bound costs no more stack than the bound.
	m := pcommon.NewMap()
	nest(m, 10_000, false)
	assert.Equal(t, TooDeep, Map(m).Kind)
}

func TestValue(t *testing.T) {
	assert.Equal(t, Problem{}, Value(pcommon.NewValueStr("hello")))
	assert.Equal(t, Problem{}, Value(pcommon.NewValueEmpty()))
	ld := plog.NewLogs()
	body := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty().Body().SetEmptyMap()
	body.PutStr("msg", "step done")
	inner := body.PutEmptyMap("labels")
	inner.PutStr("host.name", "node-a")
	inner.PutStr(rep("host.name"), "node-victim")
	got := otlpmaptest.Logs(ld).ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0).Body()
	assert.Equal(t, Problem{Kind: RepeatedKey, Key: "host.name"}, Value(got))

	// A kvlist body is level 1: MaxDepth levels pass, one more does not.
	v := pcommon.NewValueMap()
	nest(v.Map(), MaxDepth, false)
	assert.True(t, Value(v).OK())
	v = pcommon.NewValueMap()
	nest(v.Map(), MaxDepth+1, false)
	assert.Equal(t, TooDeep, Value(v).Kind)
	// So is a list body.
	v = pcommon.NewValueSlice()
	cur := v.Slice()
	for range MaxDepth - 1 {
		cur = cur.AppendEmpty().SetEmptySlice()
	}
	cur.AppendEmpty().SetStr("leaf")
	assert.True(t, Value(v).OK())
	cur.AppendEmpty().SetEmptySlice().AppendEmpty().SetStr("too deep")
	assert.Equal(t, TooDeep, Value(v).Kind)
}

func TestLogRecord(t *testing.T) {
	record := func(build func(lr plog.LogRecord)) plog.LogRecord {
		ld := plog.NewLogs()
		build(ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty())
		return otlpmaptest.Logs(ld).ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0)
	}
	for _, tc := range []struct {
		name  string
		build func(lr plog.LogRecord)
		want  Problem
	}{
		{"plain", func(lr plog.LogRecord) {
			lr.SetEventName("train.step")
			lr.Attributes().PutStr("event.name", "train.step")
			lr.Attributes().PutInt("iteration.step", 3)
		}, Problem{}},
		{"only the field", func(lr plog.LogRecord) { lr.SetEventName("gpu.xid") }, Problem{}},
		{"only the attribute", func(lr plog.LogRecord) { lr.Attributes().PutStr("event.name", "step.note") }, Problem{}},
		{"two event names", func(lr plog.LogRecord) {
			lr.SetEventName("step.note")
			lr.Attributes().PutStr("event.name", "gpu.unresponsive")
		}, Problem{Kind: RepeatedKey, Key: "event.name"}},
		{"an event name of another type", func(lr plog.LogRecord) {
			lr.SetEventName("step.note")
			lr.Attributes().PutInt("event.name", 7)
		}, Problem{Kind: RepeatedKey, Key: "event.name"}},
		{"repeated attribute", func(lr plog.LogRecord) {
			lr.Attributes().PutStr("event.name", "step.note")
			lr.Attributes().PutStr(rep("event.name"), "gpu.unresponsive")
		}, Problem{Kind: RepeatedKey, Key: "event.name"}},
		{"repeated key in the body", func(lr plog.LogRecord) {
			b := lr.Body().SetEmptyMap()
			b.PutStr("gpu.uuid", "GPU-a")
			b.PutStr(rep("gpu.uuid"), "GPU-b")
		}, Problem{Kind: RepeatedKey, Key: "gpu.uuid"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, LogRecord(record(tc.build)))
		})
	}
}

func TestSpan(t *testing.T) {
	for _, where := range []string{"span", "event", "link"} {
		td := ptrace.NewTraces()
		sp := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
		sp.Attributes().PutStr("training.job.id", "j")
		sp.Events().AppendEmpty().Attributes().PutStr("exception.type", "E")
		sp.Links().AppendEmpty().Attributes().PutStr("link.kind", "step")
		m := map[string]pcommon.Map{"span": sp.Attributes(), "event": sp.Events().At(0).Attributes(), "link": sp.Links().At(0).Attributes()}[where]
		assert.True(t, Span(sp).OK())
		m.PutStr("training.rank", "0")
		m.PutStr(rep("training.rank"), "1")
		got := otlpmaptest.Traces(td).ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
		assert.Equal(t, Problem{Kind: RepeatedKey, Key: "training.rank"}, Span(got), where)
	}
}

// Every kind of data point, on its own attributes and on an exemplar's.
func TestDataPoints(t *testing.T) {
	for _, kind := range []pmetric.MetricType{pmetric.MetricTypeGauge, pmetric.MetricTypeSum, pmetric.MetricTypeHistogram,
		pmetric.MetricTypeExponentialHistogram, pmetric.MetricTypeSummary} {
		for _, onExemplar := range []bool{false, true} {
			if onExemplar && kind == pmetric.MetricTypeSummary {
				continue // a summary point has no exemplars
			}
			name := kind.String() + map[bool]string{false: " point", true: " exemplar"}[onExemplar]
			t.Run(name, func(t *testing.T) {
				md := pmetric.NewMetrics()
				m := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
				attrs, ex := addPoint(m, kind)
				target := attrs
				if onExemplar {
					target = ex
				}
				target.PutStr("gpu.ecc.type", "sbe")
				target.PutStr(rep("gpu.ecc.type"), "dbe_volatile")
				got := otlpmaptest.Metrics(md).ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0)
				assert.Equal(t, Problem{Kind: RepeatedKey, Key: "gpu.ecc.type"}, pointProblem(got))
				assert.False(t, pointsClean(got))
			})
		}
	}
}

// addPoint gives m a point of kind and returns its attributes and those of
// an exemplar (an unused map for a summary).
func addPoint(m pmetric.Metric, kind pmetric.MetricType) (attrs, exemplar pcommon.Map) {
	m.SetName("gpu.ecc.errors")
	switch kind {
	case pmetric.MetricTypeGauge:
		dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
		return dp.Attributes(), dp.Exemplars().AppendEmpty().FilteredAttributes()
	case pmetric.MetricTypeSum:
		dp := m.SetEmptySum().DataPoints().AppendEmpty()
		return dp.Attributes(), dp.Exemplars().AppendEmpty().FilteredAttributes()
	case pmetric.MetricTypeHistogram:
		dp := m.SetEmptyHistogram().DataPoints().AppendEmpty()
		return dp.Attributes(), dp.Exemplars().AppendEmpty().FilteredAttributes()
	case pmetric.MetricTypeExponentialHistogram:
		dp := m.SetEmptyExponentialHistogram().DataPoints().AppendEmpty()
		return dp.Attributes(), dp.Exemplars().AppendEmpty().FilteredAttributes()
	}
	dp := m.SetEmptySummary().DataPoints().AppendEmpty()
	return dp.Attributes(), pcommon.NewMap()
}

// pointProblem is the check of m's first point.
func pointProblem(m pmetric.Metric) Problem {
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		return NumberDataPoint(m.Gauge().DataPoints().At(0))
	case pmetric.MetricTypeSum:
		return NumberDataPoint(m.Sum().DataPoints().At(0))
	case pmetric.MetricTypeHistogram:
		return HistogramDataPoint(m.Histogram().DataPoints().At(0))
	case pmetric.MetricTypeExponentialHistogram:
		return ExponentialHistogramDataPoint(m.ExponentialHistogram().DataPoints().At(0))
	}
	return SummaryDataPoint(m.Summary().DataPoints().At(0))
}

func TestProblemString(t *testing.T) {
	assert.Equal(t, `key "host.name" repeated`, Problem{Kind: RepeatedKey, Key: "host.name"}.String())
	assert.Equal(t, `values nested deeper than 16 levels under "deep"`, Problem{Kind: TooDeep, Key: "deep"}.String())
	assert.Equal(t, "canonical", Problem{}.String())
	long := Problem{Kind: RepeatedKey, Key: strings.Repeat("k", 10_000)}.String()
	assert.Less(t, len(long), 200, "a sender's key reaches a log line bounded")
	for k := range NumKinds {
		assert.NotEqual(t, "unknown", k.String())
	}
}

// The checks allocate nothing for maps of up to smallMap keys, nested or
// not, canonical or not.
func TestNoAllocationForSmallMaps(t *testing.T) {
	canonical := pcommon.NewMap()
	withKeys(canonical, smallMap-1)
	inner := canonical.PutEmptyMap("inner")
	withKeys(inner, 8)
	inner.PutEmptySlice("list").AppendEmpty().SetEmptyMap().PutStr("x", "y")
	repeated := otlpmaptest.Map(func(m pcommon.Map) {
		withKeys(m, 20)
		m.PutStr(rep("k19"), "again")
	})
	require.True(t, Map(canonical).OK())
	require.False(t, Map(repeated).OK())
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = Map(canonical) }))
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = Map(repeated) }))
	n := 0
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		for range Unique(repeated) {
			n++
		}
	}))
	assert.Positive(t, n)
}
