package dcgmsrc

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
)

// allFields is every catalogued field, as the receiver asks for them.
func allFields() []model.FieldID {
	ids := make([]model.FieldID, len(model.Catalogue))
	for i, f := range model.Catalogue {
		ids[i] = f.ID
	}
	return ids
}

func valuesByField(s model.GPUSample) map[model.FieldID]model.Value {
	out := map[model.FieldID]model.Value{}
	for _, v := range s.Values {
		out[v.Field] = v
	}
	return out
}

func started(t *testing.T, h *harness, cfg Config) *Source {
	t.Helper()
	s := h.source(cfg)
	require.NoError(t, s.Start(context.Background(), nil))
	t.Cleanup(func() { require.NoError(t, s.Shutdown(context.Background())) })
	return s
}

func TestShutdownRemovesDCGMObjects(t *testing.T) {
	h := newHarness(t, newFakeGPU(t, 0, modelL4), newFakeGPU(t, 1, modelL4))
	ctx := context.Background()
	a := h.source(Config{})
	b := started(t, h, Config{})
	require.NoError(t, a.Start(ctx, nil))
	_, err := a.Collect(ctx, allFields())
	require.NoError(t, err)
	assert.Empty(t, a.pollXIDs(ctx)) // makes the XID group and watch
	fg, groups, watches := h.fake.objects()
	assert.Equal(t, []int{3, 3, 5}, []int{fg, groups, watches}, "device, profiling and XID field groups; a group per GPU and the XID one")
	require.NoError(t, a.Shutdown(ctx))
	fg, groups, watches = h.fake.objects()
	assert.Equal(t, []int{0, 0, 0}, []int{fg, groups, watches}, "a shared nv-hostengine keeps nothing of a stopped source")
	require.NoError(t, a.Shutdown(ctx), "twice is fine")
	require.Error(t, a.Start(ctx, nil))
	_, err = b.Collect(ctx, []model.FieldID{model.FieldGPUTemp})
	require.NoError(t, err)
}

func TestCollectBeforeStart(t *testing.T) {
	h := newHarness(t)
	s := h.source(Config{})
	_, err := s.Collect(context.Background(), allFields())
	require.Error(t, err)
	assert.Empty(t, h.fake.calls)
	require.NoError(t, s.Shutdown(context.Background()))
}
