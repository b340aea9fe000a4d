package nodestateprocessor

import (
	"context"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/pmetrictest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/otelcol-gpu/otelcol-gpu/extension/nodestateextension/nodestate"
	"github.com/otelcol-gpu/otelcol-gpu/processor/nodestateprocessor/internal/metadata"
)

const (
	dcgmGolden = "dcgm_l4_otel.yaml"
	ibGolden   = "ib_procfs.yaml"
	l4UUID     = "GPU-c2f76b33-7953-256e-8f33-1343419b1a1c"
)

func readGoldenMetrics(tb testing.TB, name string) pmetric.Metrics {
	md, err := golden.ReadMetrics(filepath.Join("testdata", name))
	require.NoError(tb, err)
	return md
}

// startedMetrics returns a started metrics processor that records into a
// real nodestate extension and passes on to sink.
func startedMetrics(tb testing.TB, sink *consumertest.MetricsSink) (processor.Metrics, nodestate.Store) {
	h, store := startedExtension(tb)
	f := NewFactory()
	p, err := f.CreateMetrics(context.Background(), processortest.NewNopSettings(metadata.Type), f.CreateDefaultConfig(), sink)
	require.NoError(tb, err)
	require.NoError(tb, p.Start(context.Background(), h))
	tb.Cleanup(func() { require.NoError(tb, p.Shutdown(context.Background())) })
	return p, store
}

// eachPoint calls fn with every number data point of md and its metric.
func eachPoint(md pmetric.Metrics, fn func(m pmetric.Metric, dp pmetric.NumberDataPoint)) {
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		eachPointOf(rms.At(i), fn)
	}
}

// eachPointOf calls fn with every number data point of one resource.
func eachPointOf(rm pmetric.ResourceMetrics, fn func(m pmetric.Metric, dp pmetric.NumberDataPoint)) {
	eachMetric(rm.ScopeMetrics(), func(m pmetric.Metric) {
		var dps pmetric.NumberDataPointSlice
		switch m.Type() {
		case pmetric.MetricTypeGauge:
			dps = m.Gauge().DataPoints()
		case pmetric.MetricTypeSum:
			dps = m.Sum().DataPoints()
		default:
			return
		}
		for k := 0; k < dps.Len(); k++ {
			fn(m, dps.At(k))
		}
	})
}

// later is md a scrape later: every point's time moves by d, start times stay.
func later(md pmetric.Metrics, d time.Duration) pmetric.Metrics {
	eachPoint(md, func(_ pmetric.Metric, dp pmetric.NumberDataPoint) {
		dp.SetTimestamp(pcommon.NewTimestampFromTime(dp.Timestamp().AsTime().Add(d)))
	})
	return md
}

// setPoint sets the value of the points of metric with attrs in the
// resource whose resKey is resValue.
func setPoint(md pmetric.Metrics, resKey, resValue, metric string, attrs map[string]any, value int64) {
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		if v, _ := rms.At(i).Resource().Attributes().Get(resKey); v.AsString() != resValue {
			continue
		}
		eachPointOf(rms.At(i), func(m pmetric.Metric, dp pmetric.NumberDataPoint) {
			if m.Name() != metric {
				return
			}
			for k, want := range attrs {
				if v, ok := dp.Attributes().Get(k); !ok || fmt.Sprint(v.AsRaw()) != fmt.Sprint(want) {
					return
				}
			}
			dp.SetIntValue(value)
		})
	}
}

func TestGoldenDCGMMetrics(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	p, store := startedMetrics(t, sink)

	first := readGoldenMetrics(t, dcgmGolden)
	second := later(readGoldenMetrics(t, dcgmGolden), 10*time.Second)
	setPoint(second, "gpu.uuid", l4UUID, "gpu.xid.errors", map[string]any{"gpu.xid": 119}, 7)
	setPoint(second, "gpu.uuid", l4UUID, "hw.temperature", map[string]any{"hw.sensor_location": "gpu"}, 35)
	require.NoError(t, p.ConsumeMetrics(context.Background(), first))
	require.NoError(t, p.ConsumeMetrics(context.Background(), second))

	// Passed on unchanged.
	require.Len(t, sink.AllMetrics(), 2)
	require.NoError(t, pmetrictest.CompareMetrics(readGoldenMetrics(t, dcgmGolden), sink.AllMetrics()[0]))

	// The golden's gauges are at 1 ms after the epoch, its sums at 2 ms.
	ms := func(n int) time.Time { return time.Unix(0, int64(n)*int64(time.Millisecond)).UTC() }
	h, ok := store.GPUHealth(l4UUID, ms(0), ms(2))
	require.True(t, ok)
	assert.Equal(t, nodestate.GaugeReading{Value: 31, At: ms(1), Valid: true}, h.TemperatureC, "the gpu sensor, not the memory one")
	assert.False(t, h.SMActive.Valid, "the L4 scrape has no SM_ACTIVE; gr_engine and the sm clock are not it")
	assert.False(t, h.ThrottleReasons.Valid)

	h, ok = store.GPUHealth(l4UUID, ms(2), ms(10_002))
	require.True(t, ok)
	assert.Equal(t, nodestate.GaugeReading{Value: 35, At: ms(10_001), Valid: true}, h.TemperatureC)
	assert.Equal(t, []nodestate.XIDCount{{Code: 119, Count: 2}}, h.XIDs, "119 went from 5 to 7; 48 stayed at 1")
}

func TestGoldenIBMetrics(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	p, store := startedMetrics(t, sink)

	second := later(readGoldenMetrics(t, ibGolden), 10*time.Second)
	setPoint(second, "ib.device", "mlx4_0", "hw.errors", map[string]any{"ib.port": "2", "error.type": "symbol_error"}, 3)
	setPoint(second, "ib.device", "mlx4_0", "hw.errors", map[string]any{"ib.port": "2", "error.type": "link_downed"}, 1)
	setPoint(second, "ib.device", "mlx5_0", "hw.errors", map[string]any{"ib.port": "1", "error.type": "link_error_recovery"}, 2)
	require.NoError(t, p.ConsumeMetrics(context.Background(), readGoldenMetrics(t, ibGolden)))
	require.NoError(t, p.ConsumeMetrics(context.Background(), second))
	require.NoError(t, pmetrictest.CompareMetrics(readGoldenMetrics(t, ibGolden), sink.AllMetrics()[0]))

	ms := func(n int) time.Time { return time.Unix(0, int64(n)*int64(time.Millisecond)).UTC() }
	h, ok := store.NodeIBHealth(ms(2), ms(10_002))
	require.True(t, ok)
	assert.Equal(t, uint64(3), h.Totals[nodestate.IBSymbolErrors])
	assert.Equal(t, uint64(1), h.Totals[nodestate.IBLinkDowned])
	assert.Equal(t, uint64(2), h.Totals[nodestate.IBLinkErrorRecovery])
	assert.Equal(t, uint64(0), h.Totals[nodestate.IBPortRcvErrors])
	var ports []string
	for _, port := range h.Ports {
		ports = append(ports, port.Device+"/"+port.Port)
	}
	assert.Equal(t, []string{"hfi1_0/1", "mlx4_0/1", "mlx4_0/2", "mlx5_0/1"}, ports)
	assert.Equal(t, nodestate.CounterDelta{Delta: 3, Since: ms(2), Until: ms(10_002), Valid: true}, h.Ports[2].Counters[nodestate.IBSymbolErrors])
}

func TestEightGPUBatch(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	p, store := startedMetrics(t, sink)
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

	values := make([]gpuValues, 8)
	for i := range values {
		values[i] = steadyGPU(i)
	}
	require.NoError(t, p.ConsumeMetrics(context.Background(), eightGPUBatch(t, t0, values)))

	values[3].nvlink["crc_flit"] += 5
	values[3].nvlink["crc_data"] += 1
	values[5].ecc["dbe_volatile"]++
	values[5].ecc["sbe_volatile"] += 40
	values[5].xids[48] = 1
	values[2].throttle = []string{"sw_thermal_slowdown", "hw_slowdown"}
	values[2].temp = 87
	values[6].nvlink["replay"] = 0 // the driver reloaded: counters start again
	batch := eightGPUBatch(t, t0.Add(10*time.Second), values)
	require.NoError(t, p.ConsumeMetrics(context.Background(), batch))
	require.NoError(t, pmetrictest.CompareMetrics(eightGPUBatch(t, t0.Add(10*time.Second), values), sink.AllMetrics()[1]),
		"passed on unchanged")

	from, to := t0.Add(2*time.Second), t0.Add(10*time.Second)
	for i := range 8 {
		h, ok := store.GPUHealth(gpuUUID(i), from, to)
		require.True(t, ok, "gpu %d", i)
		assert.Equal(t, 0.9, h.SMActive.Value)
		assert.Equal(t, to, h.SMActive.At)
		switch i {
		case 2:
			assert.Equal(t, []string{"hw_slowdown", "sw_thermal_slowdown"}, h.ThrottleReasons.Reasons)
			assert.Equal(t, 87.0, h.TemperatureC.Value)
		case 3:
			assert.Equal(t, uint64(6), h.NVLinkCRCErrors())
			assert.Equal(t, uint64(5), h.Counters[nodestate.NVLinkCRCFlitErrors].Delta)
		case 5:
			assert.Equal(t, uint64(1), h.Counters[nodestate.ECCDBEVolatile].Delta)
			assert.Equal(t, uint64(40), h.Counters[nodestate.ECCSBEVolatile].Delta)
			assert.Equal(t, []nodestate.XIDCount{{Code: 48, Count: 1}}, h.XIDs)
		case 6:
			assert.Equal(t, 1, h.Counters[nodestate.NVLinkReplayErrors].Resets)
			assert.Equal(t, uint64(0), h.Counters[nodestate.NVLinkReplayErrors].Delta)
		default:
			assert.Equal(t, uint64(0), h.NVLinkCRCErrors(), "gpu %d", i)
			assert.Equal(t, []string{"sw_power_cap"}, h.ThrottleReasons.Reasons)
			assert.Empty(t, h.XIDs)
		}
		if i != 2 {
			assert.Equal(t, 60.0+float64(i), h.TemperatureC.Value)
		}
	}
}

// Points that do not have the expected shape are not recorded, and nothing
// panics.
func TestMetricsOfUnexpectedShape(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	p, store := startedMetrics(t, sink)
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ts := pcommon.NewTimestampFromTime(at)

	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("gpu.uuid", "GPU-odd")
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()
	gauge := func(name string) pmetric.NumberDataPoint {
		m := ms.AppendEmpty()
		m.SetName(name)
		dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
		dp.SetTimestamp(ts)
		return dp
	}
	sum := func(name string, temporality pmetric.AggregationTemporality) pmetric.NumberDataPoint {
		m := ms.AppendEmpty()
		m.SetName(name)
		m.SetEmptySum().SetAggregationTemporality(temporality)
		dp := m.Sum().DataPoints().AppendEmpty()
		dp.SetTimestamp(ts)
		return dp
	}
	dp := gauge("gpu.nvlink.errors") // a counter sent as a gauge
	dp.Attributes().PutStr("error.type", "crc_flit")
	dp.SetIntValue(5)
	dp = sum("gpu.ecc.errors", pmetric.AggregationTemporalityDelta) // delta sums are not cumulative readings
	dp.Attributes().PutStr("gpu.ecc.type", "dbe_volatile")
	dp.SetIntValue(1)
	dp = sum("gpu.ecc.errors", pmetric.AggregationTemporalityCumulative)
	dp.Attributes().PutStr("gpu.ecc.type", "sbe_volatile")
	dp.SetIntValue(-4) // not a count
	dp = sum("gpu.nvlink.errors", pmetric.AggregationTemporalityCumulative)
	dp.Attributes().PutStr("error.type", "crc_data")
	dp.SetDoubleValue(math.NaN())
	dp = sum("gpu.nvlink.errors", pmetric.AggregationTemporalityCumulative)
	dp.Attributes().PutStr("error.type", "unknown_kind")
	dp.SetIntValue(9)
	dp = sum("gpu.xid.errors", pmetric.AggregationTemporalityCumulative)
	dp.Attributes().PutStr("gpu.xid", "not a number")
	dp.SetIntValue(1)
	dp = gauge("hw.temperature") // no sensor location
	dp.SetDoubleValue(99)
	dp = gauge("gpu.prof.active")
	dp.Attributes().PutStr("gpu.prof.unit", "sm")
	dp.SetDoubleValue(0.5)
	dp.SetFlags(pmetric.DefaultDataPointFlags.WithNoRecordedValue(true))
	dp = gauge("gpu.clock.throttle")
	dp.Attributes().PutInt("gpu.throttle.reason", 4) // not a name
	dp.SetIntValue(1)
	dp = gauge("gpu.prof.active")
	dp.Attributes().PutStr("gpu.prof.unit", "sm")
	dp.SetTimestamp(0) // no time
	dp.SetDoubleValue(0.7)
	ms.AppendEmpty().SetName("gpu.prof.active") // no data at all
	h := ms.AppendEmpty()
	h.SetName("hw.temperature")
	h.SetEmptyHistogram().DataPoints().AppendEmpty()
	// An IB resource with a point without a port.
	ib := md.ResourceMetrics().AppendEmpty()
	ib.Resource().Attributes().PutStr("ib.device", "mlx5_0")
	dp = ib.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty().SetEmptySum().DataPoints().AppendEmpty()
	dp.SetTimestamp(ts)
	dp.Attributes().PutStr("error.type", "symbol_error")
	ib.ScopeMetrics().At(0).Metrics().At(0).SetName("hw.errors")
	ib.ScopeMetrics().At(0).Metrics().At(0).Sum().SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)

	require.NoError(t, p.ConsumeMetrics(context.Background(), md))
	require.Len(t, sink.AllMetrics(), 1)
	_, ok := store.GPUHealth("GPU-odd", at.Add(-time.Hour), at)
	assert.False(t, ok, "nothing of that was a reading")
	_, ok = store.NodeIBHealth(at.Add(-time.Hour), at)
	assert.False(t, ok)
}

// A resource with many timestamps records at most maxReadingsPerSource of
// them.
func TestReadingsPerResourceBounded(t *testing.T) {
	_, store := startedMetrics(t, new(consumertest.MetricsSink))
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("gpu.uuid", "GPU-many")
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("hw.temperature")
	dps := m.SetEmptyGauge().DataPoints()
	for i := range 100 {
		dp := dps.AppendEmpty()
		dp.SetTimestamp(pcommon.NewTimestampFromTime(at.Add(time.Duration(i) * time.Second)))
		dp.Attributes().PutStr("hw.sensor_location", "gpu")
		dp.SetDoubleValue(float64(i))
	}
	recordMetrics(store, md)
	h, ok := store.GPUHealth("GPU-many", at, at.Add(time.Hour))
	require.True(t, ok)
	assert.Equal(t, float64(maxReadingsPerSource-1), h.TemperatureC.Value)
}

// receiverStart is the start time of every cumulative series in an
// eightGPUBatch: the receiver has been running since.
var receiverStart = time.Date(2026, 3, 1, 11, 0, 0, 0, time.UTC)

// gpuValues are one GPU's readings in an eightGPUBatch.
type gpuValues struct {
	sm, temp float64
	throttle []string
	nvlink   map[string]int64
	ecc      map[string]int64
	xids     map[int64]int64
}

func steadyGPU(i int) gpuValues {
	return gpuValues{
		sm: 0.9, temp: 60 + float64(i),
		throttle: []string{"sw_power_cap"},
		nvlink:   map[string]int64{"crc_flit": 100, "crc_data": 7, "replay": 3, "recovery": 0},
		ecc:      map[string]int64{"sbe_volatile": 2, "dbe_volatile": 0, "sbe_aggregate": 12, "dbe_aggregate": 0},
		xids:     map[int64]int64{119: 5},
	}
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func gpuUUID(i int) string { return fmt.Sprintf("GPU-%08d-7953-256e-8f33-1343419b1a1c", i) }

// dcgmThrottleReasons are the gpu.throttle.reason values dcgmreceiver
// writes, one 0/1 series each.
var dcgmThrottleReasons = []string{
	"gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown", "sync_boost",
	"sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "display_clock_setting",
}

// eightGPUBatch is one scrape of an 8-GPU node as dcgmreceiver writes it
// under naming otel: the real L4 resource and metrics of the golden file,
// once per GPU, plus the fields that scrape lacks (SM active, clock-event
// reasons, NVLink and ECC counters) in the receiver's shape.
func eightGPUBatch(tb testing.TB, at time.Time, values []gpuValues) pmetric.Metrics {
	template := readGoldenMetrics(tb, dcgmGolden).ResourceMetrics().At(0)
	ts := pcommon.NewTimestampFromTime(at)
	start := pcommon.NewTimestampFromTime(receiverStart)
	md := pmetric.NewMetrics()
	for i, v := range values {
		rm := md.ResourceMetrics().AppendEmpty()
		template.CopyTo(rm)
		rm.Resource().Attributes().PutStr("gpu.uuid", gpuUUID(i))
		rm.Resource().Attributes().PutInt("gpu.index", int64(i))
		ms := rm.ScopeMetrics().At(0).Metrics()
		ms.RemoveIf(func(m pmetric.Metric) bool { return m.Name() == "gpu.xid.errors" })
		eachPointOf(rm, func(m pmetric.Metric, dp pmetric.NumberDataPoint) {
			dp.SetTimestamp(ts)
			if m.Type() == pmetric.MetricTypeSum {
				dp.SetStartTimestamp(start)
			}
			if loc, _ := dp.Attributes().Get("hw.sensor_location"); m.Name() == "hw.temperature" && loc.Str() == "gpu" {
				dp.SetDoubleValue(v.temp)
			}
		})
		for j := 0; j < ms.Len(); j++ {
			if ms.At(j).Name() == "gpu.prof.active" {
				// SM active beside the other units, as in a scrape with profiling fields.
				sm := ms.At(j).Gauge().DataPoints().AppendEmpty()
				sm.SetTimestamp(ts)
				sm.Attributes().PutStr("gpu.prof.unit", "sm")
				sm.SetDoubleValue(v.sm)
			}
		}

		throttle := ms.AppendEmpty()
		throttle.SetName("gpu.clock.throttle")
		throttle.SetDescription("1 while the clocks are held down for the reason in gpu.throttle.reason.")
		reasons := throttle.SetEmptyGauge().DataPoints()
		for _, reason := range dcgmThrottleReasons {
			dp := reasons.AppendEmpty()
			dp.SetTimestamp(ts)
			dp.Attributes().PutStr("gpu.throttle.reason", reason)
			dp.SetIntValue(boolInt(slices.Contains(v.throttle, reason)))
		}
		counter := func(name, unit, attr string, byKind map[string]int64) {
			m := ms.AppendEmpty()
			m.SetName(name)
			m.SetUnit(unit)
			s := m.SetEmptySum()
			s.SetIsMonotonic(true)
			s.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
			for _, kind := range slices.Sorted(maps.Keys(byKind)) {
				n := byKind[kind]
				dp := s.DataPoints().AppendEmpty()
				dp.SetStartTimestamp(start)
				dp.SetTimestamp(ts)
				dp.Attributes().PutStr(attr, kind)
				dp.SetIntValue(n)
			}
		}
		counter("gpu.nvlink.errors", "{error}", "error.type", v.nvlink)
		counter("gpu.ecc.errors", "{error}", "gpu.ecc.type", v.ecc)
		xids := ms.AppendEmpty()
		xids.SetName("gpu.xid.errors")
		xids.SetUnit("{error}")
		xs := xids.SetEmptySum()
		xs.SetIsMonotonic(true)
		xs.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		for _, code := range slices.Sorted(maps.Keys(v.xids)) {
			n := v.xids[code]
			dp := xs.DataPoints().AppendEmpty()
			dp.SetStartTimestamp(start)
			dp.SetTimestamp(ts)
			dp.Attributes().PutInt("gpu.xid", code)
			dp.SetIntValue(n)
		}
	}
	return md
}

// Whatever metrics arrive, recording never panics and keeps the store
// within bounds. Seeded with the golden scrapes as OTLP protobuf.
func FuzzRecordMetrics(f *testing.F) {
	m := &pmetric.ProtoMarshaler{}
	values := []gpuValues{steadyGPU(0), steadyGPU(1)}
	for _, md := range []pmetric.Metrics{
		readGoldenMetrics(f, dcgmGolden), readGoldenMetrics(f, ibGolden),
		eightGPUBatch(f, time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), values),
	} {
		b, err := m.MarshalMetrics(md)
		require.NoError(f, err)
		f.Add(b)
	}
	u := &pmetric.ProtoUnmarshaler{}
	f.Fuzz(func(t *testing.T, data []byte) {
		md, err := u.UnmarshalMetrics(data)
		if err != nil {
			return
		}
		limits := nodestate.Limits{Retention: time.Hour, MaxGPUs: 2, MaxIBPorts: 2, MaxSamplesPerSeries: 4, MaxXIDEventsPerGPU: 4}
		store := nodestate.NewMemoryStore(limits)
		recordMetrics(store, md)
		recordMetrics(store, md)
		st := store.Stats()
		require.LessOrEqual(t, st.GPUs, limits.MaxGPUs)
		require.LessOrEqual(t, st.IBPorts, limits.MaxIBPorts)
	})
}
