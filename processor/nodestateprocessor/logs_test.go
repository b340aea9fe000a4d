package nodestateprocessor

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/plogtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/otelcol-gpu/otelcol-gpu/extension/nodestateextension/nodestate"
	"github.com/otelcol-gpu/otelcol-gpu/processor/nodestateprocessor/internal/metadata"
)

const h100UUID = "GPU-5b4e07f6-3a86-4340-039d-25f2a83cdc43"

func readGoldenLogs(tb testing.TB) plog.Logs {
	ld, err := golden.ReadLogs(filepath.Join("testdata", "dcgm_xid119_logs.yaml"))
	require.NoError(tb, err)
	return ld
}

// The five XID 119 records of a real kernel log, as dcgmreceiver writes
// them, land on their GPU at their own times.
func TestGoldenXIDLogs(t *testing.T) {
	h, store := startedExtension(t)
	sink := new(consumertest.LogsSink)
	f := NewFactory()
	p, err := f.CreateLogs(context.Background(), processortest.NewNopSettings(metadata.Type), f.CreateDefaultConfig(), sink)
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background(), h))
	defer func() { require.NoError(t, p.Shutdown(context.Background())) }()

	require.NoError(t, p.ConsumeLogs(context.Background(), readGoldenLogs(t)))
	require.Len(t, sink.AllLogs(), 1)
	require.NoError(t, plogtest.CompareLogs(readGoldenLogs(t), sink.AllLogs()[0]), "passed on unchanged")

	// Records at 1740327858, ...864, ...870, ...8032 and ...8213 (Unix s).
	sec := func(s int64) time.Time { return time.Unix(s, 0).UTC() }
	health, ok := store.GPUHealth(h100UUID, sec(1740327850), sec(1740327870))
	require.True(t, ok)
	assert.Equal(t, []nodestate.XIDCount{{Code: 119, Count: 3}}, health.XIDs)
	health, ok = store.GPUHealth(h100UUID, sec(1740327871), sec(1740328300))
	require.True(t, ok)
	assert.Equal(t, []nodestate.XIDCount{{Code: 119, Count: 2}}, health.XIDs)
	_, ok = store.GPUHealth(h100UUID, sec(1740327000), sec(1740327857))
	assert.False(t, ok, "before the first record nothing is known")
}

func TestXIDRecordForms(t *testing.T) {
	_, store := startedExtension(t)
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ts := pcommon.NewTimestampFromTime(at)

	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	lrs := rl.ScopeLogs().AppendEmpty().LogRecords()
	// The event name as an attribute only, the GPU on the record, the code as text.
	lr := lrs.AppendEmpty()
	lr.Attributes().PutStr("event.name", "gpu.xid")
	lr.Attributes().PutStr("gpu.uuid", "GPU-a")
	lr.Attributes().PutStr("gpu.xid", "79")
	lr.SetTimestamp(ts)
	// No time: the observed time is used.
	lr = lrs.AppendEmpty()
	lr.SetEventName("gpu.xid")
	lr.Attributes().PutStr("gpu.uuid", "GPU-a")
	lr.Attributes().PutInt("gpu.xid", 48)
	lr.SetObservedTimestamp(ts + 1)
	// Not recorded: another event, no code, a negative code, no GPU, no time.
	lr = lrs.AppendEmpty()
	lr.SetEventName("gpu.unresponsive")
	lr.Attributes().PutStr("gpu.uuid", "GPU-a")
	lr.Attributes().PutInt("gpu.xid", 13)
	lr.SetTimestamp(ts)
	lr = lrs.AppendEmpty()
	lr.SetEventName("gpu.xid")
	lr.Attributes().PutStr("gpu.uuid", "GPU-a")
	lr.SetTimestamp(ts)
	lr = lrs.AppendEmpty()
	lr.SetEventName("gpu.xid")
	lr.Attributes().PutStr("gpu.uuid", "GPU-a")
	lr.Attributes().PutInt("gpu.xid", -1)
	lr.SetTimestamp(ts)
	lr = lrs.AppendEmpty()
	lr.SetEventName("gpu.xid")
	lr.Attributes().PutInt("gpu.xid", 31)
	lr.SetTimestamp(ts)
	lr = lrs.AppendEmpty()
	lr.SetEventName("gpu.xid")
	lr.Attributes().PutStr("gpu.uuid", "GPU-a")
	lr.Attributes().PutInt("gpu.xid", 62)
	lr.Body().SetStr("plain log line")

	recordLogs(store, ld)
	h, ok := store.GPUHealth("GPU-a", at.Add(-time.Second), at.Add(time.Second))
	require.True(t, ok)
	assert.Equal(t, []nodestate.XIDCount{{Code: 48, Count: 1}, {Code: 79, Count: 1}}, h.XIDs)
}

// Whatever logs arrive, recording never panics. Seeded with the golden XID
// records as OTLP protobuf.
func FuzzRecordLogs(f *testing.F) {
	b, err := (&plog.ProtoMarshaler{}).MarshalLogs(readGoldenLogs(f))
	require.NoError(f, err)
	f.Add(b)
	u := &plog.ProtoUnmarshaler{}
	f.Fuzz(func(t *testing.T, data []byte) {
		ld, err := u.UnmarshalLogs(data)
		if err != nil {
			return
		}
		limits := nodestate.Limits{Retention: time.Hour, MaxGPUs: 2, MaxIBPorts: 1, MaxSamplesPerSeries: 2, MaxXIDEventsPerGPU: 2}
		store := nodestate.NewMemoryStore(limits)
		recordLogs(store, ld)
		require.LessOrEqual(t, store.Stats().GPUs, limits.MaxGPUs)
	})
}
