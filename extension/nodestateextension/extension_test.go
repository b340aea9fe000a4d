package nodestateextension

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/otelcol-gpu/otelcol-gpu/extension/nodestateextension/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/extension/nodestateextension/nodestate"
)

type host struct {
	component.Host
	exts map[component.ID]component.Component
}

func (h host) GetExtensions() map[component.ID]component.Component { return h.exts }

// What one pipeline records through the extension another reads back, as
// the processors do: each finds the extension by id in the host.
func TestSharedThroughHost(t *testing.T) {
	ext, err := NewFactory().Create(context.Background(), nopSettings(), createDefaultConfig())
	require.NoError(t, err)
	id := component.NewID(metadata.Type)
	h := host{Host: componenttest.NewNopHost(), exts: map[component.ID]component.Component{id: ext}}
	require.NoError(t, ext.Start(context.Background(), h))

	writer, err := nodestate.FromHost(h, id)
	require.NoError(t, err)
	reader, err := nodestate.FromHost(h, id)
	require.NoError(t, err)

	t0 := time.Now().Add(-time.Minute)
	var s nodestate.GPUSample
	s.Counters[nodestate.ECCDBEVolatile] = nodestate.Counter{Value: 1, Valid: true}
	writer.RecordGPU("GPU-1", t0, s)
	s.Counters[nodestate.ECCDBEVolatile] = nodestate.Counter{Value: 3, Valid: true}
	writer.RecordGPU("GPU-1", t0.Add(10*time.Second), s)
	writer.RecordXID("GPU-1", t0.Add(5*time.Second), 48)

	health, ok := reader.GPUHealth("GPU-1", t0, t0.Add(10*time.Second))
	require.True(t, ok)
	assert.Equal(t, uint64(2), health.Counters[nodestate.ECCDBEVolatile].Delta)
	assert.Equal(t, []nodestate.XIDCount{{Code: 48, Count: 1}}, health.XIDs)

	require.NoError(t, ext.Shutdown(context.Background()))
	_, ok = reader.GPUHealth("GPU-1", t0, t0.Add(10*time.Second))
	assert.False(t, ok, "shutdown forgets the state")
}

func TestEvictionsCounted(t *testing.T) {
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) })
	set := nopSettings()
	set.TelemetrySettings = tt.NewTelemetrySettings()
	cfg := createDefaultConfig().(*Config)
	cfg.MaxGPUs = 2

	ext, err := newExtension(cfg, set)
	require.NoError(t, err)
	require.NoError(t, ext.Start(context.Background(), componenttest.NewNopHost()))
	now := time.Now()
	for _, uuid := range []string{"GPU-a", "GPU-b", "GPU-c", "GPU-d", "GPU-e"} {
		ext.RecordXID(uuid, now, 13)
	}
	assert.Equal(t, 2, ext.Stats().GPUs)

	m, err := tt.GetMetric("otelcol_nodestate_evictions")
	require.NoError(t, err)
	sum, ok := m.Data.(metricdata.Sum[int64])
	require.True(t, ok)
	require.Len(t, sum.DataPoints, 1)
	assert.Equal(t, int64(3), sum.DataPoints[0].Value)
	kind, _ := sum.DataPoints[0].Attributes.Value(metadata.TelemetryAttrKind)
	reason, _ := sum.DataPoints[0].Attributes.Value(metadata.TelemetryAttrReason)
	assert.Equal(t, "gpu", kind.AsString())
	assert.Equal(t, "capacity", reason.AsString())
	require.NoError(t, ext.Shutdown(context.Background()))
}

// The provenance processor finds the inventory the same way.
func TestInventoryThroughHost(t *testing.T) {
	ext, err := NewFactory().Create(context.Background(), nopSettings(), createDefaultConfig())
	require.NoError(t, err)
	id := component.NewID(metadata.Type)
	h := host{Host: componenttest.NewNopHost(), exts: map[component.ID]component.Component{id: ext}}
	require.NoError(t, ext.Start(context.Background(), h))
	defer func() { require.NoError(t, ext.Shutdown(context.Background())) }()

	store, err := nodestate.FromHost(h, id)
	require.NoError(t, err)
	inv, err := nodestate.InventoryFromHost(h, id)
	require.NoError(t, err)
	assert.False(t, inv.HasGPU("GPU-1"))
	store.RecordXID("GPU-1", time.Now(), 79)
	assert.True(t, inv.HasGPU("GPU-1"))
	assert.Equal(t, 1, inv.GPUCount())

	_, err = nodestate.InventoryFromHost(h, component.MustNewIDWithName("nodestate", "missing"))
	assert.Error(t, err)
}
