package provenanceprocessor

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/otelcol-gpu/otelcol-gpu/internal/otlpmap"
	"github.com/otelcol-gpu/otelcol-gpu/internal/otlpmap/otlpmaptest"
)

var rep = otlpmaptest.Repeat

// issue29Logs is the log record of issue 29: the resource names host.name
// and gpu.uuid twice (own node and GPU first, the victim's second), the
// record event.name twice (step.note, then gpu.unresponsive).
func issue29Logs() plog.Logs {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	res := rl.Resource().Attributes()
	res.PutStr("host.name", own)
	res.PutStr(rep("host.name"), victim)
	res.PutStr("gpu.uuid", ownGPUs[0])
	res.PutStr(rep("gpu.uuid"), victimGPU)
	lr := rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	lr.SetTimestamp(t0)
	lr.SetSeverityNumber(plog.SeverityNumberError)
	lr.Attributes().PutStr("event.name", "step.note")
	lr.Attributes().PutStr(rep("event.name"), "gpu.unresponsive")
	lr.Attributes().PutBool("gpu.unresponsive", true)
	return otlpmaptest.Logs(ld)
}

// The issue's record is refused whole: a permanent InvalidArgument error
// (HTTP 400 at the receiver), nothing passed on, nothing renamed, one
// refusal counted under repeated_key and logged.
func TestIssue29RecordRefused(t *testing.T) {
	h := newHarness(t, true)
	p, sink := h.logsProcessor(t)
	err := p.ConsumeLogs(context.Background(), issue29Logs())
	require.Error(t, err)
	assert.True(t, consumererror.IsPermanent(err), "the sender must not retry")
	s, ok := status.FromError(err)
	require.True(t, ok, "a gRPC status for the OTLP receiver: %v", err)
	assert.Equal(t, codes.InvalidArgument, s.Code())
	assert.Contains(t, s.Message(), `key "host.name" repeated`)
	assert.Empty(t, sink.AllLogs())
	assert.Equal(t, map[string]int64{"repeated_key": 1}, h.rejected(t), "refused before anything was judged")
	require.Equal(t, 1, h.logs.Len())
	assert.Equal(t, "repeated_key", h.logs.All()[0].ContextMap()["reason"])
	assert.Equal(t, `key "host.name" repeated`, h.logs.All()[0].ContextMap()["example"])
}

// Below the resource a record with a repeated key is dropped, the rest of
// the request passes (and is judged as usual); each drop is counted, the
// first of a reason logged once.
func TestRecordsWithRepeatedKeysDropped(t *testing.T) {
	h := newHarness(t, true)
	p, sink := h.logsProcessor(t)
	ld := xidLogs(own, ownGPUs[0]) // four hardware claims, judged as ever
	lrs := ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords()
	note := lrs.AppendEmpty()
	note.Attributes().PutStr("event.name", "step.note")
	note.Attributes().PutStr(rep("event.name"), "gpu.unresponsive")
	twoNames := lrs.AppendEmpty()
	twoNames.SetEventName("step.note")
	twoNames.Attributes().PutStr("event.name", "gpu.xid")
	deep := lrs.AppendEmpty()
	body := deep.Body().SetEmptyMap()
	for range otlpmap.MaxDepth {
		body = body.PutEmptyMap("deeper")
	}
	require.NoError(t, p.ConsumeLogs(context.Background(), otlpmaptest.Logs(ld)))
	require.NoError(t, p.ConsumeLogs(context.Background(), otlpmaptest.Logs(ld)))

	out := sink.AllLogs()
	require.Len(t, out, 2)
	for _, got := range out {
		olrs := got.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords()
		require.Equal(t, 1, olrs.Len(), "only the XID record is left")
		assert.Equal(t, "forged.gpu.xid", olrs.At(0).EventName())
	}
	assert.Equal(t, map[string]int64{"repeated_key": 4, "too_deep": 2, "hardware_signal": 10}, h.rejected(t))
	reasons := map[string]int{}
	for _, e := range h.logs.All() {
		reasons[e.ContextMap()["reason"].(string)]++
	}
	assert.Equal(t, map[string]int{"repeated_key": 1, "too_deep": 1, "hardware_signal": 1}, reasons)
}

// A request whose every record is dropped goes no further.
func TestNothingLeftIsNotPassedOn(t *testing.T) {
	h := newHarness(t, true)
	tp, tsink := h.traces(t)
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("host.name", own)
	sp := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetName("train.step")
	link := sp.Links().AppendEmpty().Attributes()
	link.PutStr("host.name", own)
	link.PutStr(rep("host.name"), victim)
	require.NoError(t, tp.ConsumeTraces(context.Background(), otlpmaptest.Traces(td)))
	assert.Empty(t, tsink.AllTraces())
	assert.Equal(t, map[string]int64{"repeated_key": 1}, h.rejected(t))
}

// Every signal: a resource's repeated key refuses the request; a data
// point's, a span's, an event's drops only that point or span.
func TestEverySignal(t *testing.T) {
	h := newHarness(t, true)
	ctx := context.Background()

	tp, tsink := h.traces(t)
	td := stepTraces(own, ownGPUs[0])
	rank3 := td.ResourceSpans().At(3).Resource().Attributes()
	rank3.PutStr(rep("host.name"), victim)
	err := tp.ConsumeTraces(ctx, otlpmaptest.Traces(td))
	require.Error(t, err)
	assert.True(t, consumererror.IsPermanent(err))
	assert.Empty(t, tsink.AllTraces())

	td = stepTraces(own, ownGPUs[0])
	ev := td.ResourceSpans().At(5).ScopeSpans().At(0).Spans().At(0).Events().AppendEmpty().Attributes()
	ev.PutStr("exception.type", "A")
	ev.PutStr(rep("exception.type"), "B")
	require.NoError(t, tp.ConsumeTraces(ctx, otlpmaptest.Traces(td)))
	require.Len(t, tsink.AllTraces(), 1)
	assert.Equal(t, 7, tsink.AllTraces()[0].SpanCount())
	assert.Equal(t, 7, tsink.AllTraces()[0].ResourceSpans().Len(), "rank 5's emptied resource is gone")

	mp, msink := h.metrics(t)
	md := dbeMetrics(own, ownGPUs[0])
	dp := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints().At(0)
	dp.Attributes().PutStr(rep("gpu.ecc.type"), "sbe")
	require.NoError(t, mp.ConsumeMetrics(ctx, otlpmaptest.Metrics(md)))
	require.Len(t, msink.AllMetrics(), 1)
	assert.Equal(t, 1, msink.AllMetrics()[0].DataPointCount())

	md = dbeMetrics(own, ownGPUs[0])
	md.ResourceMetrics().At(0).Resource().Attributes().PutStr(rep("gpu.uuid"), victimGPU)
	require.Error(t, mp.ConsumeMetrics(ctx, otlpmaptest.Metrics(md)))
	assert.Len(t, msink.AllMetrics(), 1)

	// Refused: 8 spans + 1 span + 1 point + 2 points. Judged: the kept
	// DBE point's metric name and gpu.ecc.type.
	assert.Equal(t, map[string]int64{"repeated_key": 12, "hardware_signal": 2}, h.rejected(t))
}

// What passes the check is judged exactly as before: a canonical request is
// not touched by it (TestScriptDataPassesUnchanged, the goldens), and maps
// with a key once in each of several maps are no repeat.
func TestSameKeyInSeveralMapsPasses(t *testing.T) {
	h := newHarness(t, true)
	p, sink := h.logsProcessor(t)
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("host.name", own)
	sl := rl.ScopeLogs().AppendEmpty()
	sl.Scope().Attributes().PutStr("host.name", own)
	lr := sl.LogRecords().AppendEmpty()
	lr.Attributes().PutStr("host.name", own)
	lr.Body().SetEmptyMap().PutStr("host.name", own)
	require.NoError(t, p.ConsumeLogs(context.Background(), ld))
	require.Len(t, sink.AllLogs(), 1)
	assert.Equal(t, 1, sink.AllLogs()[0].LogRecordCount())
	assert.Empty(t, h.rejected(t))
}
