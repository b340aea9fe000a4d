package stepspanprocessor

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/otelcol-gpu/otelcol-gpu/extension/nodestateextension/nodestate"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/processor/stepspanprocessor/internal/metadata"
)

// storeExtension is the nodestate store as a host extension.
type storeExtension struct {
	component.StartFunc
	component.ShutdownFunc
	*nodestate.MemoryStore
}

type storeHost struct {
	id  component.ID
	ext component.Component
}

func (h storeHost) GetExtensions() map[component.ID]component.Component {
	return map[component.ID]component.Component{h.id: h.ext}
}

// A rank's step span carries its GPU's health: the latest SM activity,
// temperature and throttle reasons, and the growth of NVLink CRC and ECC
// errors, XIDs and IB errors over the health window, as the node's metrics
// recorded them.
func TestHealthOnTheRankSpan(t *testing.T) {
	store := nodestate.NewMemoryStore(nodestate.Limits{Retention: time.Hour, MaxGPUs: 8, MaxIBPorts: 8, MaxSamplesPerSeries: 100, MaxXIDEventsPerGPU: 16})
	const uuid = "GPU-5b4e07f6-3a86-4340-039d-25f2a83cdc43"
	sample := func(crc, dbe uint64, temp float64) nodestate.GPUSample {
		var s nodestate.GPUSample
		s.SMActive = nodestate.Gauge{Value: 0.41, Valid: true}
		s.TemperatureC = nodestate.Gauge{Value: temp, Valid: true}
		s.ThrottleReasons, s.ThrottleValid = []string{"hw_thermal_slowdown"}, true
		s.Counters[nodestate.NVLinkCRCFlitErrors] = nodestate.Counter{Value: crc, Valid: true}
		s.Counters[nodestate.ECCDBEVolatile] = nodestate.Counter{Value: dbe, Valid: true}
		return s
	}
	store.RecordGPU(uuid, t0.Add(-50*time.Second), sample(1000, 0, 70))
	store.RecordGPU(uuid, t0.Add(500*time.Millisecond), sample(1340, 1, 71))
	store.RecordXID(uuid, t0.Add(200*time.Millisecond), 48)
	var ib nodestate.IBSample
	ib.Counters[nodestate.IBSymbolErrors] = nodestate.Counter{Value: 10, Valid: true}
	store.RecordIB("mlx5_0", "1", t0.Add(-40*time.Second), ib)
	ib.Counters[nodestate.IBSymbolErrors] = nodestate.Counter{Value: 17, Valid: true}
	store.RecordIB("mlx5_0", "1", t0.Add(400*time.Millisecond), ib)

	id := component.MustNewID("nodestate")
	cfg := testConfig()
	cfg.NodeState = &id
	sink := &capture{}
	p, err := NewFactory().CreateTraces(context.Background(), processortest.NewNopSettings(metadata.Type), cfg, sink)
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background(), storeHost{id: id, ext: storeExtension{MemoryStore: store}}))
	defer func() { require.NoError(t, p.Shutdown(context.Background())) }()

	td := stepTraces("llama-70b", 0, 5, 1045, "xl003", t0, t0.Add(time.Second))
	td.ResourceSpans().At(0).Resource().Attributes().PutStr(semconv.AttrGPUUUID, uuid)
	require.NoError(t, p.ConsumeTraces(context.Background(), td))
	require.Eventually(t, func() bool { return len(sink.byName(semconv.SpanTrainStep)) == 1 }, 5*time.Second, 10*time.Millisecond)
	a := sink.byName(semconv.SpanTrainStep)[0].Attributes()
	get := func(k string) any { v, ok := a.Get(k); require.True(t, ok, k); return v.AsRaw() }
	assert.Equal(t, 0.41, get(semconv.AttrHealthSMActive))
	assert.Equal(t, 71.0, get(semconv.AttrHealthTemperature))
	assert.Equal(t, []any{"hw_thermal_slowdown"}, get(semconv.AttrHealthThrottle))
	assert.Equal(t, int64(340), get(semconv.AttrHealthNVLinkCRC), "NVLink CRC +340 over the window")
	assert.Equal(t, int64(1), get(semconv.AttrHealthECCDBE))
	assert.Equal(t, []any{int64(48)}, get(semconv.AttrHealthXIDs))
	assert.Equal(t, int64(7), get(semconv.AttrHealthIBSymbol))
	assert.Equal(t, 60.0, get(semconv.AttrHealthWindowS))
}

func TestMissingNodeStateExtensionFailsStart(t *testing.T) {
	id := component.MustNewID("nodestate")
	cfg := testConfig()
	cfg.NodeState = &id
	p, err := NewFactory().CreateTraces(context.Background(), processortest.NewNopSettings(metadata.Type), cfg, &capture{})
	require.NoError(t, err)
	err = p.Start(context.Background(), componenttest.NewNopHost())
	assert.ErrorContains(t, err, `"nodestate" is not configured`)
	require.NoError(t, p.Shutdown(context.Background()))
}

// health_window 0 compares over the step alone: readings outside it do not
// count.
func TestHealthOverTheStepItself(t *testing.T) {
	store := nodestate.NewMemoryStore(nodestate.Limits{Retention: time.Hour, MaxGPUs: 8, MaxIBPorts: 8, MaxSamplesPerSeries: 100, MaxXIDEventsPerGPU: 16})
	const uuid = "GPU-1"
	rec := func(at time.Time, crc uint64) {
		var s nodestate.GPUSample
		s.Counters[nodestate.NVLinkCRCFlitErrors] = nodestate.Counter{Value: crc, Valid: true}
		store.RecordGPU(uuid, at, s)
	}
	rec(t0.Add(-30*time.Second), 100) // before the step
	rec(t0.Add(100*time.Millisecond), 150)
	rec(t0.Add(900*time.Millisecond), 170)
	attrs := pcommon.NewMap()
	res := pcommon.NewMap()
	res.PutStr(semconv.AttrGPUUUID, uuid)
	putHealth(store, 0, res, attrs, t0, t0.Add(time.Second))
	crc, _ := attrs.Get(semconv.AttrHealthNVLinkCRC)
	assert.Equal(t, int64(70), crc.Int(), "from the last reading at the step's start to its end")
	w, _ := attrs.Get(semconv.AttrHealthWindowS)
	assert.Equal(t, 1.0, w.Double())
}
