package otlpmap

import (
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/plogtest"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/pmetrictest"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/ptracetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-gpu/otelcol-gpu/internal/otlpmap/otlpmaptest"
)

// issueRecord is the log record of issue 29: host.name, gpu.uuid and
// event.name each twice, own value first.
func issueRecord(ld plog.Logs) {
	rl := ld.ResourceLogs().AppendEmpty()
	res := rl.Resource().Attributes()
	res.PutStr("host.name", "node-a")
	res.PutStr(rep("host.name"), "node-victim")
	res.PutStr("gpu.uuid", "GPU-own")
	res.PutStr(rep("gpu.uuid"), "GPU-victim")
	lr := rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	lr.Attributes().PutStr("event.name", "step.note")
	lr.Attributes().PutStr(rep("event.name"), "gpu.unresponsive")
}

// stepLog appends a canonical record to a new resource.
func stepLog(ld plog.Logs, step int64) plog.LogRecord {
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("host.name", "node-a")
	lr := rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	lr.Attributes().PutInt("iteration.step", step)
	lr.Attributes().PutInt("duration_ns", 1e9)
	return lr
}

// A repeated key in a resource refuses the whole request, and nothing is
// removed from it.
func TestFilterLogsRefusesTheRequest(t *testing.T) {
	ld := plog.NewLogs()
	stepLog(ld, 1)
	issueRecord(ld)
	stepLog(ld, 2)
	in := otlpmaptest.Logs(ld)
	before := plog.NewLogs()
	in.CopyTo(before)
	r := FilterLogs(in)
	assert.True(t, r.Refuse)
	assert.Equal(t, Problem{Kind: RepeatedKey, Key: "host.name"}, r.First)
	assert.Equal(t, 3, r.Records[RepeatedKey], "every record of the request")
	assert.Equal(t, 3, r.Refused())
	require.NoError(t, plogtest.CompareLogs(before, in), "nothing removed")
}

// A record with a repeated key is removed, whole; its scope and resource
// go with it when left empty; the others stay as they were.
func TestFilterLogsRemovesRecords(t *testing.T) {
	ld := plog.NewLogs()
	stepLog(ld, 1)
	bad := stepLog(ld, 2)
	bad.Attributes().PutStr("training.rank", "0")
	bad.Attributes().PutStr(rep("training.rank"), "1")
	// A scope with two records, one of them bad: the scope stays.
	sl := ld.ResourceLogs().At(0).ScopeLogs().At(0)
	twin := sl.LogRecords().AppendEmpty()
	twin.Body().SetEmptyMap().PutStr("k", "v")
	twin.Body().Map().PutStr(rep("k"), "w")
	// A scope whose own map repeats a key: its two records go.
	rl := ld.ResourceLogs().AppendEmpty()
	badScope := rl.ScopeLogs().AppendEmpty()
	badScope.Scope().Attributes().PutStr("a", "1")
	badScope.Scope().Attributes().PutStr(rep("a"), "2")
	badScope.LogRecords().AppendEmpty()
	badScope.LogRecords().AppendEmpty()
	rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty().Body().SetStr("kept")
	// Two event names.
	two := stepLog(ld, 3)
	two.SetEventName("train.step")
	two.Attributes().PutStr("event.name", "step.note")
	in := otlpmaptest.Logs(ld)

	r := FilterLogs(in)
	assert.False(t, r.Refuse)
	assert.Equal(t, 5, r.Records[RepeatedKey])
	assert.Equal(t, Problem{Kind: RepeatedKey, Key: "k"}, r.First)

	want := plog.NewLogs()
	stepLog(want, 1)
	kept := want.ResourceLogs().AppendEmpty()
	kept.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty().Body().SetStr("kept")
	require.NoError(t, plogtest.CompareLogs(want, in))
	assert.Equal(t, Report{}, FilterLogs(in), "what is left is canonical")
}

// A canonical request is left exactly as it was.
func TestFilterLeavesCanonicalData(t *testing.T) {
	ld := plog.NewLogs()
	stepLog(ld, 1).Body().SetEmptyMap().PutEmptyMap("inner").PutStr("k", "v")
	ld.ResourceLogs().AppendEmpty() // an empty resource is not ours to remove
	wantLogs := plog.NewLogs()
	ld.CopyTo(wantLogs)
	assert.Equal(t, Report{}, FilterLogs(ld))
	require.NoError(t, plogtest.CompareLogs(wantLogs, ld))

	td := spansWith(func(ptrace.Span) {})
	wantTraces := ptrace.NewTraces()
	td.CopyTo(wantTraces)
	assert.Equal(t, Report{}, FilterTraces(td))
	require.NoError(t, ptracetest.CompareTraces(wantTraces, td))

	md := pointsOfEveryKind(nil)
	wantMetrics := pmetric.NewMetrics()
	md.CopyTo(wantMetrics)
	assert.Equal(t, Report{}, FilterMetrics(md))
	require.NoError(t, pmetrictest.CompareMetrics(wantMetrics, md))
}

// spansWith is two resources of two spans each; mutate changes the second
// span of the first resource.
func spansWith(mutate func(ptrace.Span)) ptrace.Traces {
	td := ptrace.NewTraces()
	for r := range 2 {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("host.name", "node-a")
		ss := rs.ScopeSpans().AppendEmpty()
		for s := range 2 {
			sp := ss.Spans().AppendEmpty()
			sp.SetName("train.step")
			sp.SetSpanID(pcommon.SpanID{byte(r), byte(s)})
			sp.Attributes().PutInt("training.rank", int64(2*r+s))
			sp.Events().AppendEmpty().Attributes().PutStr("e", "v")
			sp.Links().AppendEmpty().Attributes().PutStr("l", "v")
			if r == 0 && s == 1 {
				mutate(sp)
			}
		}
	}
	return otlpmaptest.Traces(td)
}

func TestFilterTraces(t *testing.T) {
	for name, mutate := range map[string]func(ptrace.Span){
		"span":  func(sp ptrace.Span) { sp.Attributes().PutInt(rep("training.rank"), 9) },
		"event": func(sp ptrace.Span) { sp.Events().At(0).Attributes().PutStr(rep("e"), "w") },
		"link":  func(sp ptrace.Span) { sp.Links().At(0).Attributes().PutStr(rep("l"), "w") },
	} {
		t.Run(name, func(t *testing.T) {
			td := spansWith(mutate)
			r := FilterTraces(td)
			assert.False(t, r.Refuse)
			assert.Equal(t, 1, r.Refused())
			assert.Equal(t, 3, td.SpanCount())
			assert.Equal(t, 1, td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().Len())
			rank, _ := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().Get("training.rank")
			assert.Equal(t, int64(0), rank.Int(), "the other span stays")
		})
	}
	td := spansWith(func(ptrace.Span) {})
	td.ResourceSpans().At(1).Resource().Attributes().PutStr("gpu.uuid", "a")
	td.ResourceSpans().At(1).Resource().Attributes().PutStr(rep("gpu.uuid"), "b")
	td = otlpmaptest.Traces(td)
	r := FilterTraces(td)
	assert.True(t, r.Refuse)
	assert.Equal(t, 4, r.Refused())
	assert.Equal(t, 4, td.SpanCount())
}

// pointsOfEveryKind is one metric of each kind with two points each, the
// first point of each one changed by mutate (nil: none).
func pointsOfEveryKind(mutate func(attrs, exemplar pcommon.Map)) pmetric.Metrics {
	md := pmetric.NewMetrics()
	ms := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics()
	for _, kind := range []pmetric.MetricType{pmetric.MetricTypeGauge, pmetric.MetricTypeSum, pmetric.MetricTypeHistogram,
		pmetric.MetricTypeExponentialHistogram, pmetric.MetricTypeSummary} {
		m := ms.AppendEmpty()
		attrs, ex := addPoint(m, kind)
		attrs.PutStr("p", "first")
		ex.PutStr("x", "1")
		if mutate != nil {
			mutate(attrs, ex)
		}
		switch kind {
		case pmetric.MetricTypeGauge:
			m.Gauge().DataPoints().AppendEmpty().Attributes().PutStr("p", "second")
		case pmetric.MetricTypeSum:
			m.Sum().DataPoints().AppendEmpty().Attributes().PutStr("p", "second")
		case pmetric.MetricTypeHistogram:
			m.Histogram().DataPoints().AppendEmpty().Attributes().PutStr("p", "second")
		case pmetric.MetricTypeExponentialHistogram:
			m.ExponentialHistogram().DataPoints().AppendEmpty().Attributes().PutStr("p", "second")
		case pmetric.MetricTypeSummary:
			m.Summary().DataPoints().AppendEmpty().Attributes().PutStr("p", "second")
		}
	}
	return otlpmaptest.Metrics(md)
}

func TestFilterMetrics(t *testing.T) {
	md := pointsOfEveryKind(func(attrs, _ pcommon.Map) { attrs.PutStr(rep("p"), "again") })
	r := FilterMetrics(md)
	assert.False(t, r.Refuse)
	assert.Equal(t, 5, r.Refused(), "the first point of each kind")
	assert.Equal(t, 5, md.DataPointCount())
	assert.Equal(t, 5, md.MetricCount())

	md = pointsOfEveryKind(func(_, ex pcommon.Map) { ex.PutStr(rep("x"), "2") })
	r = FilterMetrics(md)
	assert.Equal(t, 4, r.Refused(), "the points whose exemplar repeats a key (a summary has none)")
	assert.Equal(t, 6, md.DataPointCount())

	// A metric whose every point goes goes too; so do its scope and
	// resource when nothing is left.
	md = pmetric.NewMetrics()
	m := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	attrs, _ := addPoint(m, pmetric.MetricTypeSum)
	attrs.PutStr("gpu.ecc.type", "sbe")
	attrs.PutStr(rep("gpu.ecc.type"), "dbe_volatile")
	md = otlpmaptest.Metrics(md)
	r = FilterMetrics(md)
	assert.Equal(t, 1, r.Refused())
	assert.Zero(t, md.ResourceMetrics().Len())

	// A scope's map: every point under it.
	md = pointsOfEveryKind(nil)
	scope := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Scope().Attributes()
	scope.PutStr("s", "1")
	scope.PutStr(rep("s"), "2")
	md = otlpmaptest.Metrics(md)
	r = FilterMetrics(md)
	assert.Equal(t, 10, r.Refused())
	assert.Zero(t, md.DataPointCount())

	// A resource's map: the request.
	md = pointsOfEveryKind(nil)
	res := md.ResourceMetrics().At(0).Resource().Attributes()
	res.PutStr("host.name", "node-a")
	res.PutStr(rep("host.name"), "node-victim")
	md = otlpmaptest.Metrics(md)
	r = FilterMetrics(md)
	assert.True(t, r.Refuse)
	assert.Equal(t, 10, r.Refused())
	assert.Equal(t, 10, md.DataPointCount())
}

// A refused request without records still counts one refusal.
func TestRefusalWithoutRecordsCounts(t *testing.T) {
	ld := plog.NewLogs()
	res := ld.ResourceLogs().AppendEmpty().Resource().Attributes()
	res.PutStr("host.name", "a")
	res.PutStr(rep("host.name"), "b")
	r := FilterLogs(otlpmaptest.Logs(ld))
	assert.True(t, r.Refuse)
	assert.Equal(t, 1, r.Refused())
}

// reencode resolves the otlpmaptest placeholders of ld.
func reencode(ld plog.Logs) plog.Logs { return otlpmaptest.Logs(ld) }
