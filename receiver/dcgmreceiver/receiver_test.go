package dcgmreceiver

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/source"
)

// fakeSource stands in for DCGM behind the source.Metrics seam: it returns
// scripted snapshots and fails Start a given number of times.
type fakeSource struct {
	mu         sync.Mutex
	startFails int
	starts     int
	snaps      []model.Snapshot // returned in turn; the last one repeats
	collects   int
	block      chan struct{} // when set, Collect waits on it, deaf to ctx like a call stuck in cgo
	sink       source.XIDSink
	shutdown   bool
}

func (f *fakeSource) Start(_ context.Context, sink source.XIDSink) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.starts++
	if f.starts <= f.startFails {
		return errors.New("libdcgm.so.4: cannot open shared object file")
	}
	f.sink = sink
	return nil
}

func (f *fakeSource) Collect(ctx context.Context, fields []model.FieldID) (model.Snapshot, error) {
	f.mu.Lock()
	block := f.block
	f.mu.Unlock()
	if block != nil {
		<-block
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	i := min(f.collects, len(f.snaps)-1)
	f.collects++
	snap := f.snaps[i]
	// Only the requested fields, as a real source does.
	want := map[model.FieldID]bool{}
	for _, id := range fields {
		want[id] = true
	}
	out := model.Snapshot{Time: snap.Time}
	for _, g := range snap.GPUs {
		g2 := g
		g2.Values = nil
		for _, v := range g.Values {
			if want[v.Field] {
				g2.Values = append(g2.Values, v)
			}
		}
		out.GPUs = append(out.GPUs, g2)
	}
	return out, nil
}

func (f *fakeSource) Shutdown(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.shutdown = true
	return nil
}

func (f *fakeSource) xid(ev model.XIDEvent) {
	f.mu.Lock()
	sink := f.sink
	f.mu.Unlock()
	sink(ev)
}

var testGPU = model.GPU{Index: 4, UUID: "GPU-c2f76b33-7953-256e-8f33-1343419b1a1c", Model: "NVIDIA H100 80GB HBM3",
	PCIBusID: "00000000:9B:00.0", Device: "nvidia4", DriverVersion: "580.105.08"}

func snapshot(at time.Time, values ...model.Value) model.Snapshot {
	return model.Snapshot{Time: at, GPUs: []model.GPUSample{{GPU: testGPU, Values: values}}}
}

func intValue(id model.FieldID, v int64) model.Value { return model.Value{Field: id, Int: v} }

func floatValue(id model.FieldID, v float64) model.Value {
	return model.Value{Field: id, Float: v, IsFloat: true}
}

type testEnv struct {
	r       *dcgmReceiver
	src     *fakeSource
	metrics *consumertest.MetricsSink
	logs    *consumertest.LogsSink
	logObs  *observer.ObservedLogs
}

func newTestEnv(t *testing.T, cfg *Config, src *fakeSource) *testEnv {
	t.Helper()
	core, obs := observer.New(zap.InfoLevel)
	set := receivertest.NewNopSettings(metadata.Type)
	set.Logger = zap.New(core)
	cfg.HostName = "xl003"
	r, err := newDCGMReceiver(cfg, set, dependencies{metricsSource: src})
	require.NoError(t, err)
	env := &testEnv{r: r, src: src, metrics: new(consumertest.MetricsSink), logs: new(consumertest.LogsSink), logObs: obs}
	r.nextMetrics, r.nextLogs = env.metrics, env.logs
	return env
}

func (e *testEnv) start(t *testing.T) {
	require.NoError(t, e.r.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, e.r.Shutdown(context.Background())) })
}

func fastConfig() *Config {
	cfg := createDefaultConfig().(*Config)
	cfg.CollectionInterval = 10 * time.Millisecond
	cfg.ProfilingInterval = 0
	return cfg
}

// findPoint returns the data point of a metric whose attributes include attrs.
func findPoint(md pmetric.Metrics, name string, attrs map[string]string) (pmetric.NumberDataPoint, bool) {
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		sms := md.ResourceMetrics().At(i).ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			ms := sms.At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				m := ms.At(k)
				if m.Name() != name {
					continue
				}
				var dps pmetric.NumberDataPointSlice
				if m.Type() == pmetric.MetricTypeSum {
					dps = m.Sum().DataPoints()
				} else {
					dps = m.Gauge().DataPoints()
				}
				for l := 0; l < dps.Len(); l++ {
					if hasAttrs(dps.At(l).Attributes(), attrs) {
						return dps.At(l), true
					}
				}
			}
		}
	}
	return pmetric.NumberDataPoint{}, false
}

func hasAttrs(m pcommon.Map, attrs map[string]string) bool {
	for k, v := range attrs {
		got, ok := m.Get(k)
		if !ok || got.AsString() != v {
			return false
		}
	}
	return true
}

func TestOTelMetricsFromSnapshot(t *testing.T) {
	at := time.Unix(1_790_000_000, 0)
	src := &fakeSource{snaps: []model.Snapshot{snapshot(at,
		intValue(model.FieldGPUTemp, 61),
		intValue(model.FieldMemoryTemp, model.Int64Blank+2), // DCGM_INT64_NOT_SUPPORTED
		floatValue(model.FieldPowerUsage, 412.5),
		intValue(model.FieldTotalEnergy, 4742776),
		intValue(model.FieldGPUUtil, 98),
		intValue(model.FieldFBUsed, 1024),
		intValue(model.FieldSMClock, 1980),
		intValue(model.FieldClocksEventReasons, 0x4|0x40),
		intValue(model.FieldNVLinkCRCFlitErrors, 340),
		intValue(model.FieldECCDBEVolTotal, 0),
	)}}
	env := newTestEnv(t, fastConfig(), src)
	env.start(t)
	require.Eventually(t, func() bool { return len(env.metrics.AllMetrics()) > 0 }, 10*time.Second, 5*time.Millisecond)
	md := env.metrics.AllMetrics()[0]

	res := md.ResourceMetrics().At(0).Resource().Attributes()
	for k, want := range map[string]string{
		semconv.AttrHostName: "xl003", semconv.AttrGPUUUID: testGPU.UUID, semconv.AttrGPUIndex: "4",
		semconv.AttrGPUModel: testGPU.Model, semconv.AttrGPUPCIBusID: testGPU.PCIBusID,
		semconv.AttrGPUDriverVersion: "580.105.08",
	} {
		got, ok := res.Get(k)
		require.True(t, ok, "resource lacks %s", k)
		assert.Equal(t, want, got.AsString(), k)
	}

	check := func(name string, attrs map[string]string, want float64) {
		t.Helper()
		dp, ok := findPoint(md, name, attrs)
		require.True(t, ok, "no %s %v", name, attrs)
		got := dp.DoubleValue()
		if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
			got = float64(dp.IntValue())
		}
		assert.InDelta(t, want, got, 1e-9, "%s %v", name, attrs)
	}
	check(semconv.MetricHWTemperature, map[string]string{semconv.AttrHWSensorLocation: "gpu"}, 61)
	check(semconv.MetricHWPower, nil, 412.5)
	check(semconv.MetricHWEnergy, nil, 4742.776)
	check(semconv.MetricHWGPUUtilization, map[string]string{semconv.AttrHWGPUTask: "general"}, 0.98)
	check(semconv.MetricHWGPUMemoryUsage, nil, 1024*1024*1024)
	check(semconv.MetricGPUClockFrequency, map[string]string{semconv.AttrGPUClockType: "sm"}, 1980e6)
	check(semconv.MetricGPUClockThrottle, map[string]string{semconv.AttrGPUThrottleReason: "sw_power_cap"}, 1)
	check(semconv.MetricGPUClockThrottle, map[string]string{semconv.AttrGPUThrottleReason: "hw_thermal_slowdown"}, 1)
	check(semconv.MetricGPUClockThrottle, map[string]string{semconv.AttrGPUThrottleReason: "gpu_idle"}, 0)
	check(semconv.MetricGPUNVLinkErrors, map[string]string{semconv.AttrErrorType: "crc_flit"}, 340)
	check(semconv.MetricGPUECCErrors, map[string]string{semconv.AttrGPUECCType: "dbe_volatile"}, 0)
	check(semconv.MetricGPUUnresponsive, nil, 0)

	// The not-supported sentinel never becomes a value.
	_, ok := findPoint(md, semconv.MetricHWTemperature, map[string]string{semconv.AttrHWSensorLocation: "memory"})
	assert.False(t, ok, "DCGM_INT64_NOT_SUPPORTED emitted as a memory temperature")

	// Counters are cumulative with a start time.
	dp, _ := findPoint(md, semconv.MetricGPUNVLinkErrors, map[string]string{semconv.AttrErrorType: "crc_flit"})
	assert.NotZero(t, dp.StartTimestamp())
}

func TestCounterResetStartsNewSeries(t *testing.T) {
	t0 := time.Now().Add(time.Hour) // after the receiver's start
	src := &fakeSource{snaps: []model.Snapshot{
		snapshot(t0, intValue(model.FieldPCIeReplayCounter, 100)),
		snapshot(t0.Add(10*time.Second), intValue(model.FieldPCIeReplayCounter, 150)),
		snapshot(t0.Add(20*time.Second), intValue(model.FieldPCIeReplayCounter, 3)), // driver reloaded
	}}
	env := newTestEnv(t, fastConfig(), src)
	env.start(t)
	require.Eventually(t, func() bool { return len(env.metrics.AllMetrics()) >= 3 }, 10*time.Second, 5*time.Millisecond)
	all := env.metrics.AllMetrics()
	var starts []pcommon.Timestamp
	for _, md := range all[:3] {
		dp, ok := findPoint(md, semconv.MetricGPUPCIeReplays, nil)
		require.True(t, ok)
		starts = append(starts, dp.StartTimestamp())
	}
	assert.Equal(t, starts[0], starts[1], "a growing counter keeps its start time")
	assert.Greater(t, starts[2], starts[1], "a counter that went down starts a new series")
	assert.Equal(t, pcommon.NewTimestampFromTime(t0.Add(10*time.Second)), starts[2], "the new series starts at the previous collection")
}

func TestDCGMExporterNaming(t *testing.T) {
	at := time.Unix(1_790_000_000, 0)
	src := &fakeSource{snaps: []model.Snapshot{{Time: at, GPUs: []model.GPUSample{{
		GPU:    testGPU,
		Owner:  model.Owner{PodName: "llama-70b-worker-3", Namespace: "training", Container: "pytorch"},
		Values: []model.Value{intValue(model.FieldGPUTemp, 61), intValue(model.FieldTotalEnergy, 4742776), floatValue(model.FieldProfTensorActive, 0.62)},
	}}}}}
	cfg := fastConfig()
	cfg.Naming = NamingDCGMExporter
	cfg.ProfilingInterval = 10 * time.Millisecond
	env := newTestEnv(t, cfg, src)
	env.start(t)
	require.Eventually(t, func() bool { return len(env.metrics.AllMetrics()) >= 2 }, 10*time.Second, 5*time.Millisecond)

	labels := map[string]string{"gpu": "4", "UUID": testGPU.UUID, "pci_bus_id": testGPU.PCIBusID, "device": "nvidia4",
		"modelName": testGPU.Model, "Hostname": "xl003", "DCGM_FI_DRIVER_VERSION": "580.105.08",
		"pod": "llama-70b-worker-3", "namespace": "training", "container": "pytorch"}
	var temp, energy, tensor bool
	for _, md := range env.metrics.AllMetrics() {
		res := md.ResourceMetrics().At(0).Resource().Attributes()
		assert.True(t, hasAttrs(res, labels), "dcgm-exporter labels on the GPU's resource: %v", res.AsRaw())
		inst, _ := res.Get("service.instance.id")
		assert.Equal(t, "xl003", inst.Str(), "service.instance.id becomes the instance label")
		if dp, ok := findPoint(md, "DCGM_FI_DEV_GPU_TEMP", nil); ok {
			temp = true
			assert.Equal(t, int64(61), dp.IntValue())
		}
		if dp, ok := findPoint(md, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", nil); ok {
			energy = true
			assert.Equal(t, int64(4742776), dp.IntValue(), "values stay in DCGM's units")
		}
		if dp, ok := findPoint(md, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", nil); ok {
			tensor = true
			assert.InDelta(t, 0.62, dp.DoubleValue(), 1e-12)
		}
	}
	assert.True(t, temp && energy && tensor, "temp %v energy %v tensor %v", temp, energy, tensor)
}

func TestXIDEventsBecomeLogRecordsAndCounts(t *testing.T) {
	at := time.Unix(1_790_000_000, 0)
	src := &fakeSource{snaps: []model.Snapshot{snapshot(at, intValue(model.FieldGPUTemp, 61))}}
	env := newTestEnv(t, fastConfig(), src)
	env.start(t)
	require.Eventually(t, func() bool { return len(env.metrics.AllMetrics()) > 0 }, 10*time.Second, 5*time.Millisecond)

	// Two occurrences of the same XID are two records: none is merged.
	when := at.Add(time.Minute)
	src.xid(model.XIDEvent{Time: when, GPU: model.GPU{UUID: testGPU.UUID}, Code: 48, Source: "dcgm"})
	src.xid(model.XIDEvent{Time: when.Add(time.Second), GPU: model.GPU{UUID: testGPU.UUID}, Code: 48, Source: "dcgm"})
	// The kernel log names only the PCI bus id, in another form.
	src.xid(model.XIDEvent{Time: when, GPU: model.GPU{PCIBusID: "0000:9b:00.0"}, Code: 119, PID: 2024380,
		ProcessName: "nvidia-smi", Message: "Timeout after 6s of waiting for RPC response from GPU4 GSP!", Source: "kmsg"})

	require.Eventually(t, func() bool { return env.logs.LogRecordCount() == 3 }, 10*time.Second, 5*time.Millisecond)
	var records []plog.LogRecord
	var resources []pcommon.Map
	for _, ld := range env.logs.AllLogs() {
		rl := ld.ResourceLogs().At(0)
		records = append(records, rl.ScopeLogs().At(0).LogRecords().At(0))
		resources = append(resources, rl.Resource().Attributes())
	}
	dbe := records[0]
	assert.Equal(t, plog.SeverityNumberFatal, dbe.SeverityNumber(), "XID 48 is critical")
	assert.Equal(t, pcommon.NewTimestampFromTime(when), dbe.Timestamp())
	code, _ := dbe.Attributes().Get(semconv.AttrGPUXID)
	assert.Equal(t, int64(48), code.Int())
	action, _ := dbe.Attributes().Get(semconv.AttrGPUXIDAction)
	assert.NotEmpty(t, action.Str())

	gsp := records[2]
	assert.Contains(t, gsp.Body().Str(), "Timeout after 6s")
	uuid, ok := resources[2].Get(semconv.AttrGPUUUID)
	require.True(t, ok, "kernel-log XID resolved to the GPU by PCI bus id")
	assert.Equal(t, testGPU.UUID, uuid.Str())
	pid, _ := gsp.Attributes().Get(semconv.AttrProcessPID)
	assert.Equal(t, int64(2024380), pid.Int())

	// Each GPU's count per XID code rides along with its metrics.
	require.Eventually(t, func() bool {
		all := env.metrics.AllMetrics()
		dp, ok := findPoint(all[len(all)-1], semconv.MetricGPUXIDErrors, map[string]string{semconv.AttrGPUXID: "48"})
		return ok && dp.IntValue() == 2
	}, 10*time.Second, 5*time.Millisecond)
}

func TestSourceUnavailableIsRetriedAndLoggedOnce(t *testing.T) {
	src := &fakeSource{startFails: 2, snaps: []model.Snapshot{snapshot(time.Unix(1_790_000_000, 0), intValue(model.FieldGPUTemp, 61))}}
	env := newTestEnv(t, fastConfig(), src)
	env.start(t) // returns at once: the collector does not wait for DCGM
	require.Eventually(t, func() bool { return len(env.metrics.AllMetrics()) > 0 }, 20*time.Second, 10*time.Millisecond)
	assert.Equal(t, 1, env.logObs.FilterMessageSnippet("GPU source unavailable").Len(), "one line for the outage, not one per attempt")
	assert.Equal(t, 1, env.logObs.FilterMessageSnippet("GPU source connected").Len())
}

func TestUnresponsiveGPUReportedOnce(t *testing.T) {
	at := time.Unix(1_790_000_000, 0)
	hung := snapshot(at)
	hung.GPUs[0].Unresponsive = true
	src := &fakeSource{snaps: []model.Snapshot{hung}}
	env := newTestEnv(t, fastConfig(), src)
	env.start(t)
	require.Eventually(t, func() bool { return len(env.metrics.AllMetrics()) >= 3 }, 10*time.Second, 5*time.Millisecond)
	dp, ok := findPoint(env.metrics.AllMetrics()[0], semconv.MetricGPUUnresponsive, nil)
	require.True(t, ok)
	assert.Equal(t, int64(1), dp.IntValue())
	assert.Equal(t, 1, env.logs.LogRecordCount(), "one record when the GPU stops answering, not one per collection")
	rec := env.logs.AllLogs()[0].ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0)
	assert.Equal(t, semconv.EventGPUHang, rec.EventName())
}

func TestShutdownDoesNotWaitForAStuckCollection(t *testing.T) {
	src := &fakeSource{block: make(chan struct{}), snaps: []model.Snapshot{snapshot(time.Unix(1_790_000_000, 0))}}
	env := newTestEnv(t, fastConfig(), src)
	require.NoError(t, env.r.Start(context.Background(), componenttest.NewNopHost()))
	require.Eventually(t, func() bool { src.mu.Lock(); defer src.mu.Unlock(); return src.starts > 0 }, 10*time.Second, 5*time.Millisecond)

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := env.r.Shutdown(ctx)
	require.ErrorContains(t, err, "still running", "Shutdown returns at its deadline and says why")
	src.mu.Lock()
	assert.True(t, src.shutdown, "the source is released even though a call is stuck")
	src.mu.Unlock()

	// The stuck call finally returns; nothing is left running.
	close(src.block)
	env.r.wg.Wait()
}
