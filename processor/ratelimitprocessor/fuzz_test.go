package ratelimitprocessor

import (
	"context"
	"testing"

	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// FuzzConsume feeds any decodable OTLP traces or logs through tight
// budgets: nothing may panic, and nothing protected or within budget may
// vanish without being counted (the sink plus the drops equal the input).
func FuzzConsume(f *testing.F) {
	tm := ptrace.ProtoMarshaler{}
	lm := plog.ProtoMarshaler{}
	td := tracesOf(map[string]int{"a": 3, "": 2})
	td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Status().SetCode(ptrace.StatusCodeError)
	if b, err := tm.MarshalTraces(td); err == nil {
		f.Add(b)
	}
	ld := plog.NewLogs()
	addRecords(logsOnHost(ld, "n", "app"), 4, plog.SeverityNumberDebug, "d")
	ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0).Attributes().PutInt("gpu.xid", 79)
	if b, err := lm.MarshalLogs(ld); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		h := newHarness(t)
		cfg := createDefaultConfig().(*Config)
		cfg.MaxKeys = 2
		cfg.Traces.SpansPerSecond, cfg.Traces.Burst = 1, 1
		cfg.Logs.RecordsPerSecond, cfg.Logs.Burst = 1, 1
		if td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(data); err == nil {
			in := td.SpanCount()
			sink := new(consumertest.TracesSink)
			p, err := newTracesProcessor(cfg, h.set, sink)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.ConsumeTraces(context.Background(), td); err != nil {
				t.Fatal(err)
			}
			if got := int64(sink.SpanCount()) + sum(h.counter(t, "otelcol_processor_ratelimit_dropped_items")); got != int64(in) {
				t.Fatalf("spans: %d in, %d passed or counted as dropped", in, got)
			}
		}
		if ld, err := (&plog.ProtoUnmarshaler{}).UnmarshalLogs(data); err == nil {
			h := newHarness(t)
			in := ld.LogRecordCount()
			sink := new(consumertest.LogsSink)
			p, err := newLogsProcessor(cfg, h.set, sink)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.ConsumeLogs(context.Background(), ld); err != nil {
				t.Fatal(err)
			}
			if got := int64(sink.LogRecordCount()) + sum(h.counter(t, "otelcol_processor_ratelimit_dropped_items")); got != int64(in) {
				t.Fatalf("records: %d in, %d passed or counted as dropped", in, got)
			}
		}
	})
}

func sum(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}
