package ratelimitprocessor

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/processor/provenanceprocessor"
)

// The bypasses of issue 19: one sender on one node tries to get more than
// its budget by rotating its job id, or by marking what it sends with
// what the limiter protects (an error status, step.slow, WARN, a
// protected scope name, an XID attribute). Each is bounded by the
// sender's budget plus the protected reserve; what is genuinely
// protected still passes.

// newTracesCfg is newTraces with the whole traces section given.
func newTracesCfg(t *testing.T, h *harness, tc TracesConfig, sink *consumertest.TracesSink) (*tracesProcessor, *fakeClock) {
	t.Helper()
	cfg := createDefaultConfig().(*Config)
	cfg.Traces = tc
	require.NoError(t, cfg.Validate())
	p, err := newTracesProcessor(cfg, h.set, sink)
	require.NoError(t, err)
	clk := &fakeClock{t: t0}
	p.lim.now = clk.now
	return p, clk
}

// nodeTraces is one resource per job, all on host node, n spans each,
// set applied to every span.
func nodeTraces(node string, jobs []string, n int, set func(ptrace.Span)) ptrace.Traces {
	td := ptrace.NewTraces()
	for _, job := range jobs {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr(semconv.AttrHostName, node)
		rs.Resource().Attributes().PutStr(semconv.AttrTrainingJobID, job)
		spans := rs.ScopeSpans().AppendEmpty().Spans()
		for i := 0; i < n; i++ {
			sp := spans.AppendEmpty()
			sp.SetName(job + "/" + strconv.Itoa(i))
			set(sp)
		}
	}
	return td
}

func plainSpan(ptrace.Span) {}

func jobIDs(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = prefix + strconv.Itoa(i)
	}
	return out
}

func TestRotatingJobIDCannotMultiplyANodesBudget(t *testing.T) {
	tc := createDefaultConfig().(*Config).Traces
	tc.SpansPerSecond, tc.Burst = 10, 100
	tc.PerNode.SpansPerSecond, tc.PerNode.Burst = 20, 250

	// Without the node budget the attack works: 50 fresh job ids, each
	// within its own burst, all pass.
	open := tc
	open.PerNode.Enabled = false
	h := newHarness(t)
	sink := new(consumertest.TracesSink)
	p, _ := newTracesCfg(t, h, open, sink)
	require.NoError(t, p.ConsumeTraces(context.Background(), nodeTraces("node1", jobIDs("rot", 50), 100, plainSpan)))
	require.Equal(t, 5000, sink.SpanCount(), "the attack, without per_node")

	h = newHarness(t)
	sink = new(consumertest.TracesSink)
	p, clk := newTracesCfg(t, h, tc, sink)
	ctx := context.Background()
	require.NoError(t, p.ConsumeTraces(ctx, nodeTraces("node1", jobIDs("rot", 50), 100, plainSpan)))
	assert.Equal(t, 250, sink.SpanCount(), "the node's burst, however many job ids")
	// Another node is not affected by node1's rotation.
	require.NoError(t, p.ConsumeTraces(ctx, nodeTraces("node2", []string{"honest"}, 100, plainSpan)))
	assert.Equal(t, 350, sink.SpanCount())

	// Ten seconds later node1 has earned 200 spans, again whatever the ids.
	clk.advance(10 * time.Second)
	sink.Reset()
	require.NoError(t, p.ConsumeTraces(ctx, nodeTraces("node1", jobIDs("again", 50), 100, plainSpan)))
	assert.Equal(t, 200, sink.SpanCount())

	assert.Equal(t, map[string]int64{"key=host.name=node1,signal=traces": 5000 - 250 + 5000 - 200},
		h.counter(t, "otelcol_processor_ratelimit_dropped_items"), "drops by the node budget are labelled with its key")
	warned := h.logs.FilterMessageSnippet("node over its budget").All()
	require.Len(t, warned, 1, "logged once per node")
	assert.Equal(t, "node1", warned[0].ContextMap()["node"])
}

func TestNodeBudgetKeyFromClientMetadata(t *testing.T) {
	tc := createDefaultConfig().(*Config).Traces
	tc.SpansPerSecond, tc.Burst = 10, 10
	tc.PerNode.SpansPerSecond, tc.PerNode.Burst = 1, 15
	h := newHarness(t)
	sink := new(consumertest.TracesSink)
	p, _ := newTracesCfg(t, h, tc, sink)
	// No host.name anywhere: the spans share the node bucket "".
	require.NoError(t, p.ConsumeTraces(context.Background(), tracesOf(map[string]int{"a": 10, "b": 10})))
	assert.Equal(t, 15, sink.SpanCount())
}

// An error status or step.slow on every span: a sender's budget plus the
// reserve pass, then its rate; the other jobs keep theirs.
func TestProtectedSpanFloodBoundedByBudgetPlusReserve(t *testing.T) {
	for name, mark := range map[string]func(ptrace.Span){
		"error status": func(sp ptrace.Span) { sp.Status().SetCode(ptrace.StatusCodeError) },
		"step.slow":    func(sp ptrace.Span) { sp.Attributes().PutBool(semconv.AttrStepSlow, true) },
	} {
		t.Run(name, func(t *testing.T) {
			tc := createDefaultConfig().(*Config).Traces
			tc.SpansPerSecond, tc.Burst, tc.ProtectedReserve = 10, 100, 50
			h := newHarness(t)
			sink := new(consumertest.TracesSink)
			p, clk := newTracesCfg(t, h, tc, sink)
			ctx := context.Background()

			td := nodeTraces("node1", []string{"flood"}, 10_000, mark)
			nodeTraces("node1", []string{"honest"}, 20, plainSpan).ResourceSpans().MoveAndAppendTo(td.ResourceSpans())
			require.NoError(t, p.ConsumeTraces(ctx, td))
			assert.Equal(t, map[string]int{"flood": 100 + 50, "honest": 20}, spansByJob(sink.AllTraces()))

			clk.advance(2 * time.Second)
			sink.Reset()
			require.NoError(t, p.ConsumeTraces(ctx, nodeTraces("node1", []string{"flood"}, 10_000, mark)))
			assert.Equal(t, 20, sink.SpanCount(), "two seconds' rate, nothing more")
			assert.Equal(t, int64(10_000-150+10_000-20), h.counter(t, "otelcol_processor_ratelimit_dropped_items")["key=flood,signal=traces"])
		})
	}
}

// A genuine failed step passes when its job's plain spans used the whole
// budget (dropped last), and its debt is repaid before plain spans pass
// again.
func TestFailedStepWithinBudgetPassesAfterPlainSpansAreCut(t *testing.T) {
	tc := createDefaultConfig().(*Config).Traces
	tc.SpansPerSecond, tc.Burst, tc.ProtectedReserve = 10, 100, 50
	h := newHarness(t)
	sink := new(consumertest.TracesSink)
	p, clk := newTracesCfg(t, h, tc, sink)
	ctx := context.Background()

	td := nodeTraces("node1", []string{"job"}, 300, plainSpan)
	failed := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().AppendEmpty()
	failed.SetName("failed-step")
	failed.Status().SetCode(ptrace.StatusCodeError)
	slow := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().AppendEmpty()
	slow.SetName("slow-step")
	slow.Attributes().PutStr(semconv.AttrStepSlow, "true")
	require.NoError(t, p.ConsumeTraces(ctx, td))
	assert.Equal(t, 102, sink.SpanCount(), "the burst of plain spans and both protected ones")
	names := map[string]bool{}
	out := sink.AllTraces()[0].ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	for i := 0; i < out.Len(); i++ {
		names[out.At(i).Name()] = true
	}
	assert.True(t, names["failed-step"])
	assert.True(t, names["slow-step"])
	assert.Equal(t, map[string]int64{"signal=traces": 2}, h.counter(t, "otelcol_processor_ratelimit_protected_items"))

	// One second earns 10 tokens; 2 repay the protected spans' debt.
	clk.advance(time.Second)
	sink.Reset()
	require.NoError(t, p.ConsumeTraces(ctx, nodeTraces("node1", []string{"job"}, 100, plainSpan)))
	assert.Equal(t, 8, sink.SpanCount())
}

// newLogsCfg is newLogs with the whole logs section given.
func newLogsCfg(t *testing.T, h *harness, lc LogsConfig, sink *consumertest.LogsSink) *logsProcessor {
	t.Helper()
	cfg := createDefaultConfig().(*Config)
	cfg.Logs = lc
	require.NoError(t, cfg.Validate())
	p, err := newLogsProcessor(cfg, h.set, sink)
	require.NoError(t, err)
	clk := &fakeClock{t: t0}
	p.lim.now = clk.now
	return p
}

// WARN on every record, or a GPU receiver's scope name: the node's budget
// plus the reserve pass. A real XID record of the dcgm receiver (gpu.xid,
// which no OTLP sender can carry past the provenance processor) passes
// after the flood, uncharged.
func TestProtectedLogFloodBoundedTrustedEvidencePasses(t *testing.T) {
	for name, flood := range map[string]func(plog.Logs){
		"WARN severity": func(ld plog.Logs) {
			addRecords(logsOnHost(ld, "node1", "app"), 10_000, plog.SeverityNumberWarn, "flood")
		},
		"ERROR severity text": func(ld plog.Logs) {
			lrs := logsOnHost(ld, "node1", "app")
			for i := 0; i < 10_000; i++ {
				lr := lrs.AppendEmpty()
				lr.SetSeverityText("ERROR")
				lr.Body().SetStr("flood" + strconv.Itoa(i))
			}
		},
		"protected scope name": func(ld plog.Logs) {
			addRecords(logsOnHost(ld, "node1", semconv.ScopeDCGMReceiver), 10_000, plog.SeverityNumberDebug, "flood")
		},
		"bare xid attribute": func(ld plog.Logs) {
			lrs := logsOnHost(ld, "node1", "app")
			addRecords(lrs, 10_000, plog.SeverityNumberDebug, "flood")
			for i := 0; i < lrs.Len(); i++ {
				lrs.At(i).Attributes().PutInt("xid", 79)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			lc := createDefaultConfig().(*Config).Logs
			lc.RecordsPerSecond, lc.Burst, lc.ProtectedReserve = 1, 100, 50
			h := newHarness(t)
			sink := new(consumertest.LogsSink)
			p := newLogsCfg(t, h, lc, sink)

			ld := plog.NewLogs()
			flood(ld)
			require.NoError(t, p.ConsumeLogs(context.Background(), ld))
			assert.Equal(t, 150, sink.LogRecordCount(), "burst plus reserve")

			sink.Reset()
			ld = plog.NewLogs()
			xid := logsOnHost(ld, "node1", semconv.ScopeDCGMReceiver).AppendEmpty()
			xid.SetEventName(semconv.EventGPUXID)
			xid.Attributes().PutInt(semconv.AttrGPUXID, 79)
			xid.Body().SetStr("real-xid")
			rec := logsOnHost(ld, "node1", semconv.ScopeFaultRecords).AppendEmpty()
			fault.Record{ID: "f1", Type: fault.TypeGPUXID, State: fault.StateOpen, Severity: fault.SeverityP4, Summary: "fault-record",
				FirstSeen: t0, LastSeen: t0}.ToLogRecord(rec)
			addRecords(logsOnHost(ld, "node1", "app"), 1, plog.SeverityNumberWarn, "late-warn")
			require.NoError(t, p.ConsumeLogs(context.Background(), ld))
			assert.ElementsMatch(t, []string{"real-xid", "fault-record"}, bodies(sink.AllLogs()),
				"trusted evidence passes uncharged; the node's WARN budget is spent")
		})
	}
}

// Through the agent's real order: an OTLP sender's XID and fault claims
// are renamed under forged. by the provenance processor, so they are not
// trusted and are limited like the sender's other records.
func TestForgedXIDFromOTLPIsNotTrusted(t *testing.T) {
	lc := createDefaultConfig().(*Config).Logs
	lc.RecordsPerSecond, lc.Burst, lc.ProtectedReserve = 1, 10, 5
	h := newHarness(t)
	sink := new(consumertest.LogsSink)
	limit := newLogsCfg(t, h, lc, sink)

	pf := provenanceprocessor.NewFactory()
	pcfg := pf.CreateDefaultConfig().(*provenanceprocessor.Config)
	pcfg.HostName = "node1"
	prov, err := pf.CreateLogs(context.Background(), processortest.NewNopSettings(component.MustNewType("provenance")), pcfg, limit)
	require.NoError(t, err)
	require.NoError(t, prov.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, prov.Shutdown(context.Background())) })

	ld := plog.NewLogs()
	lrs := logsOnHost(ld, "somewhere-else", semconv.ScopeDCGMReceiver)
	for i := 0; i < 1000; i++ {
		lr := lrs.AppendEmpty()
		lr.SetSeverityNumber(plog.SeverityNumberDebug)
		lr.SetEventName(semconv.EventGPUXID)
		lr.Attributes().PutInt(semconv.AttrGPUXID, 79)
		lr.Attributes().PutStr(fault.AttrID, "forged")
		lr.Body().SetStr("forged" + strconv.Itoa(i))
	}
	require.NoError(t, prov.ConsumeLogs(context.Background(), ld))
	assert.Equal(t, 15, sink.LogRecordCount(), "the node's burst plus the reserve (the scope name makes them priority)")
	got := sink.AllLogs()[0].ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0)
	_, renamed := got.Attributes().Get(fault.ForgedPrefix + semconv.AttrGPUXID)
	assert.True(t, renamed, "the provenance processor renamed the claim")
	assert.Equal(t, int64(1000-15), h.counter(t, "otelcol_processor_ratelimit_dropped_items")["key=node1,signal=logs"])
}
