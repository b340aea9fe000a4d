package faultcorrelatorconnector

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

const (
	testGPU  = "GPU-5f2c8e1a-93b4-4c1d-8e0f-2a6b7c9d0e11"
	testHost = "xl003"
)

var t0 = time.Date(2025, 3, 14, 9, 26, 40, 0, time.UTC)

// fakeClock is the correlator's clock in tests.
type fakeClock struct{ at time.Time }

func (f *fakeClock) now() time.Time { return f.at }

func newTestCorrelator(t *testing.T, mutate func(*Config)) (*correlator, *consumertest.LogsSink, *fakeClock) {
	t.Helper()
	cfg := createDefaultConfig().(*Config)
	if mutate != nil {
		mutate(cfg)
	}
	require.NoError(t, cfg.Validate())
	sink := new(consumertest.LogsSink)
	c, err := newCorrelator(cfg, testSettings(), sink)
	require.NoError(t, err)
	clock := &fakeClock{at: t0}
	c.now = clock.now
	return c, sink, clock
}

func xidLogs(code int64, at time.Time) plog.Logs {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("host.name", testHost)
	rl.Resource().Attributes().PutStr("gpu.uuid", testGPU)
	lr := rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	lr.SetTimestamp(pcommon.NewTimestampFromTime(at))
	lr.SetEventName("gpu.xid")
	lr.Attributes().PutStr("event.name", "gpu.xid")
	lr.Attributes().PutInt("gpu.xid", code)
	return ld
}

// faults returns every fault record the sink received, decoded.
func faults(t *testing.T, sink *consumertest.LogsSink) []fault.Record {
	t.Helper()
	var out []fault.Record
	for _, ld := range sink.AllLogs() {
		rls := ld.ResourceLogs()
		for i := 0; i < rls.Len(); i++ {
			sls := rls.At(i).ScopeLogs()
			for j := 0; j < sls.Len(); j++ {
				lrs := sls.At(j).LogRecords()
				for k := 0; k < lrs.Len(); k++ {
					r, err := fault.FromLogRecord(lrs.At(k))
					require.NoError(t, err)
					out = append(out, r)
				}
			}
		}
	}
	sink.Reset()
	return out
}

func TestXID48OpensOneFaultAndResolves(t *testing.T) {
	c, sink, clock := newTestCorrelator(t, nil)
	ctx := context.Background()

	require.NoError(t, c.ConsumeLogs(ctx, xidLogs(48, t0)))
	clock.at = t0.Add(5 * time.Second)
	require.NoError(t, c.evaluate(ctx))
	got := faults(t, sink)
	require.Len(t, got, 1)
	r := got[0]
	assert.Equal(t, fault.StateOpen, r.State)
	assert.Equal(t, fault.TypeGPUMemoryDBE, r.Type)
	assert.Equal(t, "xid_48", r.Rule)
	assert.Equal(t, fault.SeverityP1, r.Severity)
	assert.Equal(t, fault.ActionCordon, r.Action)
	assert.Equal(t, fault.ID("gpu.memory.dbe", "gpu:"+testGPU, t0, 5*time.Minute), r.ID)
	assert.Equal(t, testHost, r.HostName)
	assert.Equal(t, testGPU, r.GPUUUID)
	assert.Equal(t, 48, r.XID)
	assert.True(t, r.FirstSeen.Equal(t0))
	require.Len(t, r.Evidence, 1)
	assert.Equal(t, "gpu.xid", r.Evidence[0].Signal)
	assert.InDelta(t, 48, r.Evidence[0].Value, 0)

	// The same record again (a replay, a second exporter): no new record.
	require.NoError(t, c.ConsumeLogs(ctx, xidLogs(48, t0)))
	clock.at = t0.Add(10 * time.Second)
	require.NoError(t, c.evaluate(ctx))
	assert.Empty(t, faults(t, sink))
	assert.Equal(t, map[[2]string]int64{{"gpu.memory.dbe", "P1"}: 1}, c.openCounts())

	// Still inside the rule window: still open, nothing emitted.
	clock.at = t0.Add(4 * time.Minute)
	require.NoError(t, c.evaluate(ctx))
	assert.Empty(t, faults(t, sink))

	// The XID leaves the 5m window at t0+5m; resolved 5m after the last match.
	clock.at = t0.Add(5*time.Minute + time.Second)
	require.NoError(t, c.evaluate(ctx))
	assert.Empty(t, faults(t, sink))
	clock.at = t0.Add(9*time.Minute + time.Second)
	require.NoError(t, c.evaluate(ctx))
	got = faults(t, sink)
	require.Len(t, got, 1)
	assert.Equal(t, fault.StateResolved, got[0].State)
	assert.Equal(t, r.ID, got[0].ID)
	assert.Empty(t, c.openCounts())
}

func TestForgedFaultRecordCausesNothing(t *testing.T) {
	c, sink, clock := newTestCorrelator(t, nil)
	ctx := context.Background()

	// A training pod sends a "fault record" of its own over OTLP.
	forged := plog.NewLogs()
	rl := forged.ResourceLogs().AppendEmpty()
	rl.Resource().Attributes().PutStr("host.name", testHost)
	rl.Resource().Attributes().PutStr("gpu.uuid", testGPU)
	lr := rl.ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	fault.Record{
		ID: "0123456789abcdef", Type: fault.TypeGPUMemoryDBE, State: fault.StateOpen, Severity: fault.SeverityP1,
		Confidence: 1, Rule: "xid_48", Action: fault.ActionDrain, BlastRadius: fault.BlastNode,
		Entity: fault.Entity{Kind: fault.EntityGPU, Key: testGPU}, FirstSeen: t0, LastSeen: t0,
	}.ToLogRecord(lr)
	lr.Attributes().Remove("gpu.xid")
	require.NoError(t, c.ConsumeLogs(ctx, forged))

	// The correlator read a renamed copy: the input, which the gateway's
	// other pipelines share, is left as it came.
	v, untouched := lr.Attributes().Get(fault.AttrType)
	require.True(t, untouched)
	assert.Equal(t, "gpu.memory.dbe", v.Str())
	assert.Equal(t, fault.EventName, lr.EventName())

	clock.at = t0.Add(5 * time.Second)
	require.NoError(t, c.evaluate(ctx))
	assert.Empty(t, faults(t, sink))
	assert.Empty(t, c.openCounts())
}

// nvlinkMetrics is one scrape of one GPU: the cumulative NVLink CRC counter,
// the GPU temperature and the rank's all-reduce latency (delta histogram).
func nvlinkMetrics(at time.Time, crc int64, tempC, allReduceS float64) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	ra := rm.Resource().Attributes()
	ra.PutStr("host.name", testHost)
	ra.PutStr("gpu.uuid", testGPU)
	ra.PutStr("training.job.id", "llama-70b")
	ra.PutInt("training.rank", 1045)
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()
	ts := pcommon.NewTimestampFromTime(at)

	crcM := ms.AppendEmpty()
	crcM.SetName("gpu.nvlink.errors")
	sum := crcM.SetEmptySum()
	sum.SetIsMonotonic(true)
	sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	dp := sum.DataPoints().AppendEmpty()
	dp.SetTimestamp(ts)
	dp.SetIntValue(crc)
	dp.Attributes().PutStr("error.type", "crc_flit")

	tempM := ms.AppendEmpty()
	tempM.SetName("hw.temperature")
	g := tempM.SetEmptyGauge().DataPoints().AppendEmpty()
	g.SetTimestamp(ts)
	g.SetDoubleValue(tempC)
	g.Attributes().PutStr("hw.sensor_location", "gpu")

	durM := ms.AppendEmpty()
	durM.SetName("nccl.collective.duration")
	h := durM.SetEmptyHistogram()
	h.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	hp := h.DataPoints().AppendEmpty()
	hp.SetTimestamp(ts)
	hp.SetCount(10)
	hp.SetSum(10 * allReduceS)
	hp.Attributes().PutStr("nccl.collective", "all_reduce")
	return md
}

func feedNVLink(t *testing.T, c *correlator, tempC float64) time.Time {
	t.Helper()
	// Six healthy scrapes build the all-reduce baseline; then the CRC
	// counter jumps by 340 and the all-reduce takes 3.4x as long.
	at := t0
	for i := 0; i < 6; i++ {
		require.NoError(t, c.ConsumeMetrics(context.Background(), nvlinkMetrics(at, 1000, tempC, 0.1)))
		at = at.Add(10 * time.Second)
	}
	require.NoError(t, c.ConsumeMetrics(context.Background(), nvlinkMetrics(at, 1340, tempC, 0.34)))
	return at
}

func TestNVLinkDegradedFromCRCGrowthAndSlowCollectives(t *testing.T) {
	c, sink, clock := newTestCorrelator(t, nil)
	last := feedNVLink(t, c, 71)
	clock.at = last.Add(time.Second)
	require.NoError(t, c.evaluate(context.Background()))

	var nvlink []fault.Record
	for _, r := range faults(t, sink) {
		if r.Type == fault.TypeNVLinkDegraded {
			nvlink = append(nvlink, r)
		}
	}
	require.Len(t, nvlink, 1, "one fault per entity and type, whatever number of rules matched")
	r := nvlink[0]
	assert.Equal(t, "nvlink_crc_over_100_allreduce_3x", r.Rule) // the P1 rule wins over the P2 trend
	assert.Equal(t, fault.SeverityP1, r.Severity)
	assert.Equal(t, fault.Entity{Kind: fault.EntityGPU, Key: testGPU}, r.Entity)
	assert.Equal(t, testHost, r.HostName)
	signals := map[string]float64{}
	for _, ev := range r.Evidence {
		signals[ev.Signal] = ev.Value
	}
	assert.InDelta(t, 340, signals["gpu.nvlink.errors{error.type=crc_flit}"], 1e-9)
	assert.Greater(t, signals["nccl.collective.duration{nccl.collective=all_reduce}"], 3.0)
	assert.InDelta(t, 71, signals["hw.temperature{hw.sensor_location=gpu}"], 1e-9)
}

func TestNVLinkNotBlamedWhenHot(t *testing.T) {
	c, sink, clock := newTestCorrelator(t, nil)
	last := feedNVLink(t, c, 90) // thermal: the CRC rule requires a normal temperature
	clock.at = last.Add(time.Second)
	require.NoError(t, c.evaluate(context.Background()))
	for _, r := range faults(t, sink) {
		assert.NotEqual(t, fault.TypeNVLinkDegraded, r.Type)
	}
}

func TestEvidenceChangeIsOneUpdate(t *testing.T) {
	c, sink, clock := newTestCorrelator(t, nil)
	ctx := context.Background()
	last := feedNVLink(t, c, 71)
	clock.at = last.Add(time.Second)
	require.NoError(t, c.evaluate(ctx))
	opened := faults(t, sink)
	require.NotEmpty(t, opened)

	// More CRC errors: the same fault, one update with the same id.
	at := last.Add(10 * time.Second)
	require.NoError(t, c.ConsumeMetrics(ctx, nvlinkMetrics(at, 1500, 71, 0.34)))
	clock.at = at.Add(time.Second)
	require.NoError(t, c.evaluate(ctx))
	var updates []fault.Record
	for _, r := range faults(t, sink) {
		if r.Type == fault.TypeNVLinkDegraded {
			updates = append(updates, r)
		}
	}
	require.Len(t, updates, 1)
	assert.Equal(t, fault.StateUpdate, updates[0].State)
	assert.Equal(t, opened[0].Type, fault.TypeNVLinkDegraded)
	assert.True(t, updates[0].FirstSeen.Equal(opened[0].FirstSeen))
}

func TestMaxOpenFaultsBoundsState(t *testing.T) {
	c, sink, clock := newTestCorrelator(t, func(cfg *Config) { cfg.MaxOpenFaults = 1 })
	ctx := context.Background()
	require.NoError(t, c.ConsumeLogs(ctx, xidLogs(48, t0)))
	require.NoError(t, c.ConsumeLogs(ctx, xidLogs(13, t0)))
	clock.at = t0.Add(time.Second)
	require.NoError(t, c.evaluate(ctx))
	assert.Len(t, faults(t, sink), 1)
	assert.Equal(t, 1, c.dropped)
}

func TestStartEvaluatesOnIntervalAndExportsFaultsOpen(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.EvaluationInterval = 10 * time.Millisecond
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	set := testSettings()
	set.TelemetrySettings.MeterProvider = provider
	sink := new(consumertest.LogsSink)
	c, err := newCorrelator(cfg, set, sink)
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, c.Start(ctx, componenttest.NewNopHost()))
	now := time.Now()
	require.NoError(t, c.ConsumeLogs(ctx, xidLogs(79, now)))
	require.Eventually(t, func() bool { return sink.LogRecordCount() == 1 }, 5*time.Second, 5*time.Millisecond)

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(ctx, &rm))
	found := false
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "otelcol_faultcorrelator_faults_open" {
				continue
			}
			g := m.Data.(metricdata.Gauge[int64])
			require.Len(t, g.DataPoints, 1)
			assert.Equal(t, int64(1), g.DataPoints[0].Value)
			typ, _ := g.DataPoints[0].Attributes.Value("fault.type")
			assert.Equal(t, "gpu.fell_off_bus", typ.AsString())
			found = true
		}
	}
	assert.True(t, found)
	require.NoError(t, c.Shutdown(ctx))
	require.NoError(t, provider.Shutdown(ctx))
}
