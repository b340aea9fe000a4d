package dcgmsrc

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
)

func TestConnectionLossRecreatesGroups(t *testing.T) {
	h := newHarness(t, newFakeGPU(t, 0, modelL4), newFakeGPU(t, 1, modelL4))
	s := started(t, h, Config{})
	ctx := context.Background()
	fields := []model.FieldID{model.FieldGPUTemp, model.FieldProfSMActive, model.FieldProfPCIeRxBytes}
	_, err := s.Collect(ctx, fields)
	require.NoError(t, err)

	h.fake.killEngine() // nv-hostengine restarts
	_, err = s.Collect(ctx, fields)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "dcgmreceiver: dcgm:")
	_, err = s.Collect(ctx, fields)
	require.Error(t, err, "still down")

	h.fake.startEngine(false)
	h.clock.Advance(time.Second)
	snap, err := s.Collect(ctx, fields)
	require.NoError(t, err)
	assert.Equal(t, 2, h.fake.instance)
	assert.Equal(t, 1, h.fake.cleanups, "the lost connection was shut down before Init")
	for _, gpu := range snap.GPUs {
		got := valuesByField(gpu)
		assert.Equal(t, int64(31), got[model.FieldGPUTemp].Int)
		assert.Equal(t, int64(17544), got[model.FieldProfPCIeRxBytes].Int)
	}
	fg, groups, watches := h.fake.objects()
	assert.Equal(t, []int{2, 2, 4}, []int{fg, groups, watches}, "groups and watches made again on the new engine")
}
