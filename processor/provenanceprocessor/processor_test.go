package provenanceprocessor

import (
	"context"
	"strings"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/plogtest"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/ptracetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

func str(t *testing.T, m pcommon.Map, k string) string {
	t.Helper()
	v, ok := m.Get(k)
	if !ok {
		return "<absent>"
	}
	return v.AsString()
}

// host.name on a resource: stamped; a differing claim kept as
// forged.host.name and counted; the own name, an empty one or none is not
// counted.
func TestHostNameStamped(t *testing.T) {
	for _, tc := range []struct {
		name       string
		claim      *string
		wantForged string
		counted    int64
	}{
		{"other node", ptr(victim), victim, 1},
		{"own node", ptr(own), "<absent>", 0},
		{"empty", ptr(""), "<absent>", 0},
		{"absent", nil, "<absent>", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, true)
			p, sink := h.logsProcessor(t)
			ld := plog.NewLogs()
			rl := ld.ResourceLogs().AppendEmpty()
			if tc.claim != nil {
				rl.Resource().Attributes().PutStr("host.name", *tc.claim)
			}
			rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty().Body().SetStr("hello")
			require.NoError(t, p.ConsumeLogs(context.Background(), ld))
			res := sink.AllLogs()[0].ResourceLogs().At(0).Resource().Attributes()
			assert.Equal(t, own, str(t, res, "host.name"))
			assert.Equal(t, tc.wantForged, str(t, res, "forged.host.name"))
			assert.Equal(t, tc.counted, h.rejected(t)["host_name"])
		})
	}
}

func ptr(s string) *string { return &s }

// A non-string host.name claim is replaced too.
func TestHostNameOfAnotherType(t *testing.T) {
	h := newHarness(t, true)
	p, sink := h.logsProcessor(t)
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutInt("host.name", 7)
	require.NoError(t, p.ConsumeLogs(context.Background(), ld))
	res := sink.AllLogs()[0].ResourceLogs().At(0).Resource().Attributes()
	assert.Equal(t, own, str(t, res, "host.name"))
	assert.Equal(t, "7", str(t, res, "forged.host.name"))
	assert.Equal(t, int64(1), h.rejected(t)["host_name"])
}

// host.name below the resource (scope, span, event, link) names another
// node only under forged.; the own name stays.
func TestHostNameBelowTheResource(t *testing.T) {
	h := newHarness(t, true)
	p, sink := h.traces(t)
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("host.name", own)
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().Attributes().PutStr("host.name", victim)
	sp := ss.Spans().AppendEmpty()
	sp.Attributes().PutStr("host.name", victim)
	sp.Events().AppendEmpty().Attributes().PutStr("host.name", victim)
	sp.Links().AppendEmpty().Attributes().PutStr("host.name", own)
	require.NoError(t, p.ConsumeTraces(context.Background(), td))

	out := sink.AllTraces()[0].ResourceSpans().At(0)
	assert.Equal(t, own, str(t, out.Resource().Attributes(), "host.name"))
	assert.Equal(t, "<absent>", str(t, out.Resource().Attributes(), "forged.host.name"))
	oss := out.ScopeSpans().At(0)
	assert.Equal(t, "<absent>", str(t, oss.Scope().Attributes(), "host.name"))
	assert.Equal(t, victim, str(t, oss.Scope().Attributes(), "forged.host.name"))
	osp := oss.Spans().At(0)
	assert.Equal(t, victim, str(t, osp.Attributes(), "forged.host.name"))
	assert.Equal(t, "<absent>", str(t, osp.Attributes(), "host.name"))
	assert.Equal(t, victim, str(t, osp.Events().At(0).Attributes(), "forged.host.name"))
	assert.Equal(t, own, str(t, osp.Links().At(0).Attributes(), "host.name"), "the own name is kept")
	assert.Equal(t, int64(3), h.rejected(t)["host_name"])
}

// gpu.uuid and gpu.index: kept when the node's GPU receiver reported the
// GPU, renamed and counted otherwise.
func TestGPUClaims(t *testing.T) {
	h := newHarness(t, true)
	p, sink := h.metrics(t)
	md := pmetric.NewMetrics()
	add := func(uuid string, index pcommon.Value) {
		rm := md.ResourceMetrics().AppendEmpty()
		uuid2 := uuid
		rm.Resource().Attributes().PutStr("gpu.uuid", uuid2)
		index.CopyTo(rm.Resource().Attributes().PutEmpty("gpu.index"))
		g := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
		g.SetName("training.mfu")
		g.SetEmptyGauge().DataPoints().AppendEmpty().SetDoubleValue(0.4)
	}
	add(ownGPUs[0], pcommon.NewValueInt(0))
	add(ownGPUs[1], pcommon.NewValueStr("1"))
	add(victimGPU, pcommon.NewValueInt(2)) // both unknown
	add(ownGPUs[1], pcommon.NewValueDouble(1.5))
	add(ownGPUs[0], pcommon.NewValueInt(-1))
	require.NoError(t, p.ConsumeMetrics(context.Background(), md))

	rms := sink.AllMetrics()[0].ResourceMetrics()
	for i, want := range []struct{ uuid, forgedUUID, index, forgedIndex string }{
		{ownGPUs[0], "<absent>", "0", "<absent>"},
		{ownGPUs[1], "<absent>", "1", "<absent>"},
		{"<absent>", victimGPU, "<absent>", "2"},
		{ownGPUs[1], "<absent>", "<absent>", "1.5"},
		{ownGPUs[0], "<absent>", "<absent>", "-1"},
	} {
		res := rms.At(i).Resource().Attributes()
		assert.Equal(t, want.uuid, str(t, res, "gpu.uuid"), "resource %d", i)
		assert.Equal(t, want.forgedUUID, str(t, res, "forged.gpu.uuid"), "resource %d", i)
		assert.Equal(t, want.index, str(t, res, "gpu.index"), "resource %d", i)
		assert.Equal(t, want.forgedIndex, str(t, res, "forged.gpu.index"), "resource %d", i)
		assert.Equal(t, "training.mfu", rms.At(i).ScopeMetrics().At(0).Metrics().At(0).Name(), "a script's own metric passes")
	}
	assert.Equal(t, map[string]int64{"gpu": 4}, h.rejected(t))
}

// Before the GPU receiver's first scrape the inventory is empty, and
// without a nodestate extension there is none: no GPU claim holds.
func TestGPUClaimsFailClosed(t *testing.T) {
	for _, tc := range []struct {
		name      string
		scraped   bool
		nodestate bool
	}{
		{"before the first scrape", false, true},
		{"no nodestate configured", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.scraped)
			if !tc.nodestate {
				h.cfg.NodeState = nil
			}
			p, sink := h.traces(t)
			require.NoError(t, p.ConsumeTraces(context.Background(), stepTraces(own, ownGPUs[0])))
			rss := sink.AllTraces()[0].ResourceSpans()
			for i := 0; i < rss.Len(); i++ {
				res := rss.At(i).Resource().Attributes()
				assert.Equal(t, "<absent>", str(t, res, "gpu.uuid"))
				assert.Equal(t, ownGPUs[0], str(t, res, "forged.gpu.uuid"))
			}
			assert.Equal(t, map[string]int64{"gpu": 8}, h.rejected(t))
		})
	}
}

// A missing nodestate extension is a start error naming it.
func TestStartWithoutTheExtension(t *testing.T) {
	h := newHarness(t, true)
	other := h.cfg.NodeState.String() + "/other"
	id := *h.cfg.NodeState
	require.NoError(t, id.UnmarshalText([]byte(other)))
	h.cfg.NodeState = &id
	p, err := NewFactory().CreateLogs(context.Background(), h.set, h.cfg, nil)
	require.NoError(t, err)
	err = p.Start(context.Background(), h.host)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "nodestate/other")
}

// Hardware signals arriving over OTLP are renamed wherever they are:
// metric names, log attributes and event names, span attributes.
func TestHardwareSignalsRenamed(t *testing.T) {
	h := newHarness(t, true)
	mp, msink := h.metrics(t)
	require.NoError(t, mp.ConsumeMetrics(context.Background(), dbeMetrics(own, ownGPUs[0])))
	m := msink.AllMetrics()[0].ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0)
	assert.Equal(t, "forged.gpu.ecc.errors", m.Name())
	dp := m.Sum().DataPoints().At(1)
	assert.Equal(t, "dbe_volatile", str(t, dp.Attributes(), "forged.gpu.ecc.type"))
	assert.Equal(t, "<absent>", str(t, dp.Attributes(), "gpu.ecc.type"))

	lp, lsink := h.logsProcessor(t)
	require.NoError(t, lp.ConsumeLogs(context.Background(), xidLogs(own, ownGPUs[0])))
	lr := lsink.AllLogs()[0].ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0)
	assert.Equal(t, "forged.gpu.xid", lr.EventName())
	assert.Equal(t, "79", str(t, lr.Attributes(), "forged.gpu.xid"))
	assert.Equal(t, "gpu.xid", str(t, lr.Attributes(), "forged.event.name"))
	for _, k := range []string{"gpu.xid", "event.name", "gpu.xid.name", "gpu.xid.source"} {
		assert.Equal(t, "<absent>", str(t, lr.Attributes(), k))
	}

	tp, tsink := h.traces(t)
	td := stepTraces(own, ownGPUs[0])
	sp := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
	sp.Attributes().PutInt("gpu.health.ecc_dbe_errors", 4)
	sp.Attributes().PutStr("ib.health.link_downed", "2")
	hang := td.ResourceSpans().At(1).ScopeSpans().At(0).Spans().AppendEmpty()
	hang.SetName("all_reduce")
	hang.Attributes().PutStr("nccl.collective", "all_reduce")
	hang.Status().SetCode(ptrace.StatusCodeError)
	hang.Status().SetMessage("timed out after 600000 ms")
	require.NoError(t, tp.ConsumeTraces(context.Background(), td))
	out := tsink.AllTraces()[0]
	osp := out.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
	assert.Equal(t, "4", str(t, osp.Attributes(), "forged.gpu.health.ecc_dbe_errors"))
	assert.Equal(t, "2", str(t, osp.Attributes(), "forged.ib.health.link_downed"))
	assert.Equal(t, "2.25", str(t, osp.Attributes(), "training.loss"), "the loss passes")
	ohang := out.ResourceSpans().At(1).ScopeSpans().At(0).Spans().At(1)
	assert.Equal(t, "all_reduce", str(t, ohang.Attributes(), "forged.nccl.collective"))

	// 1 metric name + 2 points' gpu.ecc.type; event name + 4 record
	// attributes; 2 health attributes + nccl.collective.
	assert.Equal(t, map[string]int64{"hardware_signal": 3 + 5 + 3}, h.rejected(t))
}

// fault.* attributes and the gpu.fault event name are renamed as at the
// correlator's edge (internal/fault), and counted.
func TestFaultAttributesStripped(t *testing.T) {
	h := newHarness(t, true)
	p, sink := h.logsProcessor(t)
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	lr := rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	lr.SetEventName("gpu.fault")
	lr.Attributes().PutStr("fault.id", "f-1")
	lr.Attributes().PutStr("fault.type", "gpu.xid")
	require.NoError(t, p.ConsumeLogs(context.Background(), ld))
	olr := sink.AllLogs()[0].ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0)
	assert.Equal(t, "forged.gpu.fault", olr.EventName())
	assert.Equal(t, "f-1", str(t, olr.Attributes(), "forged.fault.id"))
	assert.Equal(t, "<absent>", str(t, olr.Attributes(), "fault.id"))
	assert.Equal(t, map[string]int64{"fault_attribute": 3}, h.rejected(t))
}

// What a training script legitimately sends from this node (its step
// spans and step records, loss, training.error, its GPU) passes unchanged
// and uncounted.
func TestScriptDataPassesUnchanged(t *testing.T) {
	h := newHarness(t, true)
	tp, tsink := h.traces(t)
	td := stepTraces(own, ownGPUs[1])
	want := ptrace.NewTraces()
	td.CopyTo(want)
	require.NoError(t, tp.ConsumeTraces(context.Background(), td))
	require.NoError(t, ptracetest.CompareTraces(want, tsink.AllTraces()[0]))

	lp, lsink := h.logsProcessor(t)
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("host.name", own)
	rl.Resource().Attributes().PutStr("training.job.id", "llama-70b")
	rl.Resource().Attributes().PutStr("gpu.uuid", ownGPUs[0])
	lrs := rl.ScopeLogs().AppendEmpty().LogRecords()
	step := lrs.AppendEmpty()
	step.Attributes().PutStr("event.name", "train.step")
	step.Attributes().PutInt("iteration.step", 7)
	step.Attributes().PutInt("training.rank", 0)
	step.Attributes().PutInt("duration_ns", 1e9)
	step.Attributes().PutDouble("training.loss", 2.5)
	failed := lrs.AppendEmpty()
	failed.Attributes().PutStr("training.error", "oom")
	failed.Attributes().PutStr("error.type", "OutOfMemoryError")
	wantLogs := plog.NewLogs()
	ld.CopyTo(wantLogs)
	require.NoError(t, lp.ConsumeLogs(context.Background(), ld))
	require.NoError(t, plogtest.CompareLogs(wantLogs, lsink.AllLogs()[0]))

	assert.Empty(t, h.rejected(t))
	assert.Zero(t, h.logs.Len(), "nothing to warn about")
}

// The first rejection of a reason is logged once, with an example.
func TestWarnsOncePerReason(t *testing.T) {
	h := newHarness(t, true)
	p, _ := h.logsProcessor(t)
	for range 3 {
		require.NoError(t, p.ConsumeLogs(context.Background(), xidLogs(victim, victimGPU)))
	}
	entries := h.logs.All()
	reasons := map[string]int{}
	for _, e := range entries {
		reasons[e.ContextMap()["reason"].(string)]++
	}
	assert.Equal(t, map[string]int{"host_name": 1, "gpu": 1, "hardware_signal": 1}, reasons)
	// gpu.index 0 is one of node-a's GPUs: only the uuid is foreign.
	assert.Equal(t, map[string]int64{"host_name": 3, "gpu": 3, "hardware_signal": 15}, h.rejected(t))
}

// A sender's text reaches the log bounded.
func TestExampleClipped(t *testing.T) {
	long := strings.Repeat("x", 10_000)
	assert.Equal(t, long[:maxExample]+"...", clip(long))
	assert.Equal(t, "short", clip("short"))
}
