package dcgmsrc

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
)

func TestHangingGPUIsUnresponsiveOthersFine(t *testing.T) {
	h := newHarness(t, newFakeGPU(t, 0, modelL4), newFakeGPU(t, 1, modelL4), newFakeGPU(t, 2, modelL4))
	s := h.source(Config{CallTimeout: 50 * time.Millisecond})
	ctx := context.Background()
	require.NoError(t, s.Start(ctx, nil))
	fields := []model.FieldID{model.FieldGPUTemp}
	_, err := s.Collect(ctx, fields)
	require.NoError(t, err)

	release := h.fake.hang(1) // GPU 1 fell off the bus
	defer release()
	for range 3 {
		begin := time.Now()
		snap, err := s.Collect(ctx, fields)
		require.NoError(t, err)
		assert.Less(t, time.Since(begin), time.Second, "a stuck GPU costs one call timeout at most")
		require.Len(t, snap.GPUs, 3)
		assert.True(t, snap.GPUs[1].Unresponsive)
		assert.Empty(t, snap.GPUs[1].Values)
		assert.Equal(t, "GPU-c2f76b33-7953-256e-8f33-1343419b1a01", snap.GPUs[1].GPU.UUID, "still identified")
		for _, i := range []int{0, 2} {
			assert.False(t, snap.GPUs[i].Unresponsive)
			assert.Equal(t, int64(31), valuesByField(snap.GPUs[i])[model.FieldGPUTemp].Int)
		}
	}
	assert.Equal(t, 1, h.count("did not answer in time"))

	// Shutdown does not wait for the stuck call.
	begin := time.Now()
	require.NoError(t, s.Shutdown(ctx))
	assert.Less(t, time.Since(begin), time.Second)
	assert.Equal(t, 1, h.count("still stuck at shutdown"))

	release()
	require.NoError(t, s.guard.Wait(ctx))
	assert.Equal(t, 1, h.fake.cleanups, "the stuck call's return finishes the disconnect")
}

func TestUnresponsiveGPURecovers(t *testing.T) {
	h := newHarness(t, newFakeGPU(t, 0, modelL4))
	s := started(t, h, Config{CallTimeout: 20 * time.Millisecond})
	ctx := context.Background()
	fields := []model.FieldID{model.FieldGPUTemp}
	release := h.fake.hang(0)
	snap, err := s.Collect(ctx, fields)
	require.NoError(t, err)
	require.True(t, snap.GPUs[0].Unresponsive)
	assert.Equal(t, model.GPU{Index: 0, Device: "nvidia0"}, snap.GPUs[0].GPU, "hung before its attributes were read")

	release()
	require.NoError(t, s.guard.Wait(ctx))
	snap, err = s.Collect(ctx, fields)
	require.NoError(t, err)
	assert.False(t, snap.GPUs[0].Unresponsive)
	assert.Equal(t, "NVIDIA L4", snap.GPUs[0].GPU.Model)
	assert.Contains(t, valuesByField(snap.GPUs[0]), model.FieldGPUTemp)
	assert.Equal(t, 1, h.count("GPU answers again"))
}
