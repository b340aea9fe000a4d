package ratelimitprocessor

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

// newLogs returns a logs processor at rate/burst per host on a fake clock.
func newLogs(t *testing.T, h *harness, rate float64, burst int, maxSeverity string, sink *consumertest.LogsSink) (*logsProcessor, *fakeClock) {
	t.Helper()
	cfg := createDefaultConfig().(*Config)
	cfg.Logs.RecordsPerSecond, cfg.Logs.Burst, cfg.Logs.MaxSeverity = rate, burst, maxSeverity
	require.NoError(t, cfg.Validate())
	p, err := newLogsProcessor(cfg, h.set, sink)
	require.NoError(t, err)
	clk := &fakeClock{t: t0}
	p.lim.now = clk.now
	return p, clk
}

func TestDebugLogsLimitedPerHost(t *testing.T) {
	h := newHarness(t)
	sink := new(consumertest.LogsSink)
	p, clk := newLogs(t, h, 2, 10, "INFO", sink)
	ctx := context.Background()

	ld := plog.NewLogs()
	addRecords(logsOnHost(ld, "node1", "app"), 50, plog.SeverityNumberDebug, "node1-debug")
	addRecords(logsOnHost(ld, "node2", "app"), 30, plog.SeverityNumberInfo, "node2-info")
	addRecords(logsOnHost(ld, "node3", "app"), 5, plog.SeverityNumberInfo4, "node3-info4")
	require.NoError(t, p.ConsumeLogs(ctx, ld))
	assert.Equal(t, 25, sink.LogRecordCount(), "10 per busy host, all 5 of the quiet one")

	sink.Reset()
	clk.advance(1500 * time.Millisecond) // 3 tokens each
	ld = plog.NewLogs()
	addRecords(logsOnHost(ld, "node1", "app"), 50, plog.SeverityNumberTrace, "node1-trace")
	addRecords(logsOnHost(ld, "node2", "app"), 1, plog.SeverityNumberDebug, "node2-debug")
	require.NoError(t, p.ConsumeLogs(ctx, ld))
	assert.Equal(t, 4, sink.LogRecordCount())

	assert.Equal(t, map[string]int64{
		"key=node1,signal=logs": 40 + 47,
		"key=node2,signal=logs": 20,
	}, h.counter(t, "otelcol_processor_ratelimit_dropped_items"))
}

func TestLogsAboveMaxSeverityNotLimited(t *testing.T) {
	h := newHarness(t)
	sink := new(consumertest.LogsSink)
	p, _ := newLogs(t, h, 1, 1, "debug", sink)
	ld := plog.NewLogs()
	lrs := logsOnHost(ld, "node1", "app")
	addRecords(lrs, 5, plog.SeverityNumberDebug, "debug")
	addRecords(lrs, 5, plog.SeverityNumberInfo, "info")
	addRecords(lrs, 5, plog.SeverityNumberUnspecified, "unset") // no severity: limited
	for _, text := range []string{"info", "Notice", "debug", "", "verbose"} {
		lr := lrs.AppendEmpty()
		lr.SetSeverityText(text)
		lr.Body().SetStr("text-" + text)
	}
	require.NoError(t, p.ConsumeLogs(context.Background(), ld))
	got := bodies(sink.AllLogs())
	assert.ElementsMatch(t, []string{"debug0", "info0", "info1", "info2", "info3", "info4", "text-info", "text-Notice"}, got,
		"INFO is above max_severity DEBUG; unset severity counts as below it")
	assert.Empty(t, h.counter(t, "otelcol_processor_ratelimit_protected_items"), "not limited is not protected")
}

func TestProtectedLogsSurvive(t *testing.T) {
	h := newHarness(t)
	sink := new(consumertest.LogsSink)
	p, _ := newLogs(t, h, 0.001, 1, "INFO", sink)
	ld := plog.NewLogs()

	app := logsOnHost(ld, "node1", "app")
	addRecords(app, 5, plog.SeverityNumberDebug, "chatter") // only chatter0 fits the budget
	protect := func(body string, set func(plog.LogRecord)) {
		lr := app.AppendEmpty()
		lr.SetSeverityNumber(plog.SeverityNumberInfo)
		lr.Body().SetStr(body)
		set(lr)
	}
	protect("warn", func(lr plog.LogRecord) { lr.SetSeverityNumber(plog.SeverityNumberWarn) })
	protect("fatal", func(lr plog.LogRecord) { lr.SetSeverityNumber(plog.SeverityNumberFatal4) })
	protect("text-error", func(lr plog.LogRecord) {
		lr.SetSeverityNumber(plog.SeverityNumberUnspecified)
		lr.SetSeverityText("ERROR")
	})
	protect("text-warning", func(lr plog.LogRecord) {
		lr.SetSeverityNumber(plog.SeverityNumberUnspecified)
		lr.SetSeverityText("warning")
	})
	protect("xid", func(lr plog.LogRecord) { lr.Attributes().PutInt("xid", 79) })
	protect("gpu.xid", func(lr plog.LogRecord) { lr.Attributes().PutInt("gpu.xid", 48) })
	protect("gpu.xid.code", func(lr plog.LogRecord) { lr.Attributes().PutStr("gpu.xid.code", "94") })
	protect("unresponsive", func(lr plog.LogRecord) { lr.Attributes().PutBool("gpu.unresponsive", false) })
	protect("nccl.finding", func(lr plog.LogRecord) { lr.Attributes().PutStr("nccl.finding", "hang") })
	protect("training.error", func(lr plog.LogRecord) { lr.Attributes().PutStr("training.error", "nan_loss") })
	protect("training.loss", func(lr plog.LogRecord) { lr.Attributes().PutDouble("training.loss", 2.31) })
	protect("fault.attr", func(lr plog.LogRecord) { lr.Attributes().PutStr("fault.type", "gpu.xid") })
	protect("event-attr-nccl", func(lr plog.LogRecord) { lr.Attributes().PutStr("event.name", "nccl.timeout") })
	protect("event-attr-fault", func(lr plog.LogRecord) { lr.Attributes().PutStr("event.name", "fault.opened") })
	protect("event-field-gpu", func(lr plog.LogRecord) { lr.SetEventName("gpu.ecc.dbe") })
	protect("step-record", func(lr plog.LogRecord) {
		lr.Attributes().PutInt("iteration.step", 7)
		lr.Attributes().PutInt("duration_ns", 3e9)
	})
	// Look-alikes that are not protected.
	protect("event-other", func(lr plog.LogRecord) { lr.Attributes().PutStr("event.name", "app.started") })
	protect("step-only", func(lr plog.LogRecord) { lr.Attributes().PutInt("iteration.step", 7) })
	protect("forged", func(lr plog.LogRecord) {
		lr.SetEventName(fault.ForgedPrefix + fault.EventName)
		lr.Attributes().PutStr(fault.ForgedPrefix+fault.AttrID, "x")
	})

	// Every record of the GPU and NCCL receivers and the correlator,
	// whatever its severity and attributes.
	for _, scope := range []string{
		"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver",
		"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver",
	} {
		addRecords(logsOnHost(ld, "node1", scope), 3, plog.SeverityNumberInfo, scope[strings.LastIndex(scope, "/")+1:])
	}
	// A P4 fault record is INFO: its scope, event name and attributes
	// protect it.
	rec := logsOnHost(ld, "node1", "github.com/otelcol-gpu/otelcol-gpu/processor/faultcorrelator").AppendEmpty()
	fault.Record{ID: "f1", Type: fault.TypeGPUXID, State: fault.StateOpen, Severity: fault.SeverityP4, Summary: "fault-record",
		FirstSeen: t0, LastSeen: t0}.ToLogRecord(rec)
	require.Equal(t, plog.SeverityNumberInfo, rec.SeverityNumber())

	require.NoError(t, p.ConsumeLogs(context.Background(), ld))
	got := bodies(sink.AllLogs())
	want := []string{"chatter0", "warn", "fatal", "text-error", "text-warning", "xid", "gpu.xid", "gpu.xid.code", "unresponsive",
		"nccl.finding", "training.error", "training.loss", "fault.attr", "event-attr-nccl", "event-attr-fault", "event-field-gpu", "step-record",
		"dcgmreceiver0", "dcgmreceiver1", "dcgmreceiver2", "ncclflightreceiver0", "ncclflightreceiver1", "ncclflightreceiver2",
		"fault-record"}
	assert.ElementsMatch(t, want, got)
	assert.Equal(t, map[string]int64{"signal=logs": int64(len(want) - 1)}, h.counter(t, "otelcol_processor_ratelimit_protected_items"))
	assert.Equal(t, map[string]int64{"key=node1,signal=logs": 4 + 3}, h.counter(t, "otelcol_processor_ratelimit_dropped_items"),
		"four chatter records and the three look-alikes")
}

func TestLogsKeyFromRecordAttribute(t *testing.T) {
	h := newHarness(t)
	sink := new(consumertest.LogsSink)
	p, _ := newLogs(t, h, 1, 2, "INFO", sink)
	ld := plog.NewLogs()
	lrs := logsOnHost(ld, "", "app")
	for i := 0; i < 10; i++ {
		lr := lrs.AppendEmpty()
		lr.SetSeverityNumber(plog.SeverityNumberInfo)
		lr.Attributes().PutStr("host.name", "node"+strconv.Itoa(i%2))
	}
	require.NoError(t, p.ConsumeLogs(context.Background(), ld))
	assert.Equal(t, 4, sink.LogRecordCount())
	assert.Equal(t, map[string]int64{"key=node0,signal=logs": 3, "key=node1,signal=logs": 3},
		h.counter(t, "otelcol_processor_ratelimit_dropped_items"))
}

func TestLogsLRUEviction(t *testing.T) {
	h := newHarness(t)
	sink := new(consumertest.LogsSink)
	cfg := createDefaultConfig().(*Config)
	cfg.MaxKeys = 3
	cfg.Logs.RecordsPerSecond, cfg.Logs.Burst = 0.001, 1
	p, err := newLogsProcessor(cfg, h.set, sink)
	require.NoError(t, err)
	p.lim.now = (&fakeClock{t: t0}).now
	ld := plog.NewLogs()
	for i := 0; i < 10; i++ {
		addRecords(logsOnHost(ld, "node"+strconv.Itoa(i), "app"), 1, plog.SeverityNumberDebug, "r")
	}
	require.NoError(t, p.ConsumeLogs(context.Background(), ld))
	assert.Equal(t, 10, sink.LogRecordCount(), "each new host starts full")
	assert.Equal(t, 3, p.lim.key.table.len())
	assert.Equal(t, map[string]int64{"signal=logs": 7}, h.counter(t, "otelcol_processor_ratelimit_evicted_keys"))
}

func TestMalformedLogsNeverPanic(t *testing.T) {
	h := newHarness(t)
	sink := new(consumertest.LogsSink)
	p, _ := newLogs(t, h, 1, 1, "INFO", sink)
	ld := plog.NewLogs()
	ld.ResourceLogs().AppendEmpty()
	ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty()
	lrs := logsOnHost(ld, "", "")
	lr := lrs.AppendEmpty()
	lr.SetSeverityNumber(plog.SeverityNumber(99)) // out of range: treated as above WARN
	lr = lrs.AppendEmpty()
	lr.SetSeverityNumber(plog.SeverityNumber(-4)) // negative: read as unset
	lr.Attributes().PutInt("event.name", 3)       // not a string
	lr.Attributes().PutEmptySlice("host.name")    // not a key
	lrs.AppendEmpty().SetSeverityText("\x00\xff")
	require.NotPanics(t, func() { require.NoError(t, p.ConsumeLogs(context.Background(), ld)) })
	require.Len(t, sink.AllLogs(), 1)
	assert.Equal(t, 3, sink.AllLogs()[0].ResourceLogs().Len(), "containers that came empty are kept")
	assert.Equal(t, 2, sink.LogRecordCount(), "the out-of-range severity passes; the two keyless records share one bucket of 1")
}

// The scopes never limited are exactly those internal/semconv names for
// the GPU and NCCL receivers and the correlator's fault records: the
// components write their records under those names, and
// TestProtectedLogsSurvive checks the names as they arrive on the wire.
func TestProtectedScopesAreTheSemconvScopes(t *testing.T) {
	assert.Equal(t, map[string]bool{
		semconv.ScopeDCGMReceiver:       true,
		semconv.ScopeNCCLFlightReceiver: true,
		semconv.ScopeFaultRecords:       true,
	}, protectedScopes)
}
