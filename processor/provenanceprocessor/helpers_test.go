package provenanceprocessor

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-gpu/otelcol-gpu/extension/nodestateextension/nodestate"
	"github.com/otelcol-gpu/otelcol-gpu/processor/provenanceprocessor/internal/metadata"
)

const (
	own    = "node-a"      // the agent's node
	victim = "node-victim" // the node a sender claims
)

// ownGPUs are the GPUs node-a's GPU receiver reported.
var ownGPUs = []string{"GPU-11111111-aaaa-bbbb-cccc-000000000000", "GPU-11111111-aaaa-bbbb-cccc-000000000001"}

const victimGPU = "GPU-99999999-aaaa-bbbb-cccc-000000000000"

const counterName = "otelcol_processor_provenance_rejected_claims"

// storeExtension is the nodestate store as a host extension.
type storeExtension struct {
	component.StartFunc
	component.ShutdownFunc
	*nodestate.MemoryStore
}

type storeHost struct {
	component.Host
	id  component.ID
	ext component.Component
}

func (h storeHost) GetExtensions() map[component.ID]component.Component {
	return map[component.ID]component.Component{h.id: h.ext}
}

// harness is a processor's settings with a metric reader, an observed
// logger and a host whose nodestate store knows ownGPUs (when scraped).
type harness struct {
	set    processor.Settings
	cfg    *Config
	reader *sdkmetric.ManualReader
	logs   *observer.ObservedLogs
	store  *nodestate.MemoryStore
	host   component.Host
}

// newHarness: scraped says whether the GPU receiver reported yet.
func newHarness(t testing.TB, scraped bool) *harness {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { require.NoError(t, provider.Shutdown(context.Background())) })
	core, logs := observer.New(zap.InfoLevel)
	set := processortest.NewNopSettings(metadata.Type)
	set.TelemetrySettings.MeterProvider = provider
	set.Logger = zap.New(core)
	store := nodestate.NewMemoryStore(nodestate.DefaultLimits())
	if scraped {
		for _, u := range ownGPUs {
			var s nodestate.GPUSample
			s.TemperatureC = nodestate.Gauge{Value: 40, Valid: true}
			store.RecordGPU(u, time.Now(), s)
		}
	}
	id := component.MustNewID("nodestate")
	return &harness{
		set: set, reader: reader, logs: logs, store: store,
		cfg:  &Config{HostName: own, NodeState: &id},
		host: storeHost{Host: componenttest.NewNopHost(), id: id, ext: storeExtension{MemoryStore: store}},
	}
}

func (h *harness) traces(t testing.TB) (processor.Traces, *consumertest.TracesSink) {
	t.Helper()
	sink := &consumertest.TracesSink{}
	p, err := NewFactory().CreateTraces(context.Background(), h.set, h.cfg, sink)
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background(), h.host))
	t.Cleanup(func() { require.NoError(t, p.Shutdown(context.Background())) })
	return p, sink
}

func (h *harness) logsProcessor(t testing.TB) (processor.Logs, *consumertest.LogsSink) {
	t.Helper()
	sink := &consumertest.LogsSink{}
	p, err := NewFactory().CreateLogs(context.Background(), h.set, h.cfg, sink)
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background(), h.host))
	t.Cleanup(func() { require.NoError(t, p.Shutdown(context.Background())) })
	return p, sink
}

func (h *harness) metrics(t testing.TB) (processor.Metrics, *consumertest.MetricsSink) {
	t.Helper()
	sink := &consumertest.MetricsSink{}
	p, err := NewFactory().CreateMetrics(context.Background(), h.set, h.cfg, sink)
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background(), h.host))
	t.Cleanup(func() { require.NoError(t, p.Shutdown(context.Background())) })
	return p, sink
}

// rejected returns the counter by reason.
func (h *harness) rejected(t *testing.T) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, h.reader.Collect(context.Background(), &rm))
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != counterName {
				continue
			}
			sum, ok := m.Data.(metricdata.Sum[int64])
			require.True(t, ok, "%s is an int64 sum", counterName)
			require.True(t, sum.IsMonotonic)
			for _, dp := range sum.DataPoints {
				v, _ := dp.Attributes.Value(metadata.TelemetryAttrReason)
				out[v.AsString()] += dp.Value
			}
		}
	}
	return out
}

var t0 = pcommon.NewTimestampFromTime(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))

// xidLogs is an XID 79 record as the dcgm receiver writes it, claiming
// host and GPU uuid.
func xidLogs(host, uuid string) plog.Logs {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("host.name", host)
	rl.Resource().Attributes().PutStr("gpu.uuid", uuid)
	rl.Resource().Attributes().PutInt("gpu.index", 0)
	sl := rl.ScopeLogs().AppendEmpty()
	sl.Scope().SetName("github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver")
	lr := sl.LogRecords().AppendEmpty()
	lr.SetTimestamp(t0)
	lr.SetEventName("gpu.xid")
	lr.SetSeverityNumber(plog.SeverityNumberError)
	lr.Body().SetStr("XID 79: GPU has fallen off the bus")
	lr.Attributes().PutStr("event.name", "gpu.xid")
	lr.Attributes().PutInt("gpu.xid", 79)
	lr.Attributes().PutStr("gpu.xid.name", "GPU has fallen off the bus")
	lr.Attributes().PutStr("gpu.xid.source", "kmsg")
	return ld
}

// dbeMetrics is a cumulative gpu.ecc.errors{dbe_volatile} going 0 -> 3.
func dbeMetrics(host, uuid string) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("host.name", host)
	rm.Resource().Attributes().PutStr("gpu.uuid", uuid)
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("gpu.ecc.errors")
	sum := m.SetEmptySum()
	sum.SetIsMonotonic(true)
	sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	for i, v := range []int64{0, 3} {
		dp := sum.DataPoints().AppendEmpty()
		dp.SetStartTimestamp(t0)
		dp.SetTimestamp(t0 + pcommon.Timestamp(i+1)*1e10)
		dp.SetIntValue(v)
		dp.Attributes().PutStr("gpu.ecc.type", "dbe_volatile")
	}
	return md
}

// stepTraces is one step of an 8-rank job: every rank's train.step span,
// rank 3 2.5x slower and on host rank3Host, the others on own.
func stepTraces(rank3Host string, gpu string) ptrace.Traces {
	td := ptrace.NewTraces()
	for rank := range 8 {
		rs := td.ResourceSpans().AppendEmpty()
		res := rs.Resource().Attributes()
		res.PutStr("service.name", "train.py")
		res.PutStr("training.job.id", "llama-70b")
		res.PutInt("training.attempt", 0)
		res.PutInt("training.rank", int64(rank))
		res.PutInt("training.local_rank", int64(rank%2))
		res.PutInt("training.world_size", 8)
		host := own
		if rank == 3 {
			host = rank3Host
		}
		res.PutStr("host.name", host)
		res.PutStr("gpu.uuid", gpu)
		res.PutInt("process.pid", int64(1000+rank))
		sp := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
		sp.SetName("train.step")
		sp.SetTraceID(pcommon.TraceID{1, 2, 3})
		sp.SetSpanID(pcommon.SpanID{byte(rank + 1)})
		d := pcommon.Timestamp(1e9)
		if rank == 3 {
			d = 2500 * 1e6
		}
		sp.SetStartTimestamp(t0)
		sp.SetEndTimestamp(t0 + d)
		a := sp.Attributes()
		a.PutInt("iteration.step", 18231)
		a.PutInt("training.phase.forward_ns", int64(d)/3)
		a.PutInt("training.phase.backward_ns", int64(d)/2)
		a.PutDouble("training.loss", 2.25)
		a.PutInt("nccl.collectives.count", 5)
	}
	return td
}
