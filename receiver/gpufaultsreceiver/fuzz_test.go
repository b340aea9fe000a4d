package gpufaultsreceiver

import (
	"context"
	"runtime"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/receiver/receiverhelper"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpufaultsreceiver/internal/metadata"
)

// FuzzRoute feeds any bytes through decode-and-route: nothing may panic,
// every record ends delivered or counted as refused (never lost silently,
// never a retry), and routing one record allocates a bounded multiple of
// its size and keeps nothing afterwards.
func FuzzRoute(f *testing.F) {
	var m plog.ProtoMarshaler
	ld := plog.NewLogs()
	lr := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	lr.Body().SetStr("fault")
	lr.Attributes().PutStr("fault.id", "f-1")
	if b, err := m.MarshalLogs(ld); err == nil {
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f})
	tt := componenttest.NewTelemetry()
	f.Cleanup(func() { _ = tt.Shutdown(context.Background()) })
	set := receivertest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = tt.NewTelemetrySettings()
	set.Logger = zap.NewNop()
	tb, err := metadata.NewTelemetryBuilder(set.TelemetrySettings)
	if err != nil {
		f.Fatal(err)
	}
	obs, err := receiverhelper.NewObsReport(receiverhelper.ObsReportSettings{ReceiverID: set.ID, Transport: "kafka", ReceiverCreateSettings: set})
	if err != nil {
		f.Fatal(err)
	}
	sink := new(consumertest.LogsSink)
	r := &router{next: sink, obs: obs, tb: tb, logger: set.Logger}
	f.Fuzz(func(t *testing.T, data []byte) {
		rec := &kgo.Record{Topic: "gpu_faults", Partition: 2, Offset: 7, Value: data}
		done := metricSum(tt, "otelcol_gpu_faults_records_delivered") + metricSum(tt, "otelcol_gpu_faults_records_refused")

		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if err := r.route(context.Background(), rec); err != nil {
			t.Fatalf("route asked for a retry on its own: %v", err)
		}
		sink.Reset()
		runtime.GC()
		runtime.ReadMemStats(&after)
		if grown := after.TotalAlloc - before.TotalAlloc; grown > uint64(256*len(data))+1<<20 {
			t.Fatalf("routing %d bytes allocated %d bytes", len(data), grown)
		}
		if kept := int64(after.HeapAlloc) - int64(before.HeapAlloc); kept > int64(64*len(data))+1<<20 {
			t.Fatalf("routing %d bytes kept %d bytes on the heap", len(data), kept)
		}
		now := metricSum(tt, "otelcol_gpu_faults_records_delivered") + metricSum(tt, "otelcol_gpu_faults_records_refused")
		if now-done != 1 {
			t.Fatalf("delivered + refused grew by %d, want exactly 1", now-done)
		}
	})
}

func metricSum(tt *componenttest.Telemetry, name string) int64 {
	m := &member{tt: tt}
	return m.counter(name, "")
}
