package dcgmsrc

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
)

func TestProfilingRefusedKeepsDeviceFields(t *testing.T) {
	h := newHarness(t, newFakeGPU(t, 0, modelL4))
	h.fake.set(func(f *fakeDCGM) { f.profBusyWatch = true }) // Nsight holds the counters
	s := started(t, h, Config{ProfilingInterval: 30 * time.Second})
	ctx := context.Background()
	fields := []model.FieldID{model.FieldGPUTemp, model.FieldProfSMActive, model.FieldProfDRAMActive}

	snap, err := s.Collect(ctx, fields)
	require.NoError(t, err)
	got := valuesByField(snap.GPUs[0])
	assert.Contains(t, got, model.FieldGPUTemp)
	assert.NotContains(t, got, model.FieldProfDRAMActive)
	assert.Equal(t, 1, h.count("profiling fields unavailable"))

	// Within the back-off, profiling is not even tried.
	watches := h.fake.callCount("Watch")
	h.clock.Advance(29 * time.Second)
	snap, err = s.Collect(ctx, fields)
	require.NoError(t, err)
	assert.Contains(t, valuesByField(snap.GPUs[0]), model.FieldGPUTemp)
	assert.Equal(t, watches, h.fake.callCount("Watch"))

	// After it, tried again; still refused: the back-off doubles, no new line.
	h.clock.Advance(time.Second)
	_, err = s.Collect(ctx, fields)
	require.NoError(t, err)
	assert.Equal(t, watches+1, h.fake.callCount("Watch"))
	s.mu.Lock()
	assert.Equal(t, time.Minute, s.prof.backoff)
	s.mu.Unlock()
	assert.Equal(t, 1, h.count("profiling fields unavailable"))

	// The profiler is gone: profiling resumes, said once.
	h.fake.set(func(f *fakeDCGM) { f.profBusyWatch = false })
	h.clock.Advance(time.Minute)
	for range 2 {
		snap, err = s.Collect(ctx, fields)
		require.NoError(t, err)
		assert.Contains(t, valuesByField(snap.GPUs[0]), model.FieldProfDRAMActive)
	}
	assert.Equal(t, 1, h.count("profiling fields available again"))
	assert.Equal(t, 1, h.count("profiling fields unavailable"))
}

func TestProfilingLostWhileReading(t *testing.T) {
	h := newHarness(t, newFakeGPU(t, 0, modelL4), newFakeGPU(t, 1, modelL4))
	s := started(t, h, Config{ProfilingInterval: 30 * time.Second})
	ctx := context.Background()
	fields := []model.FieldID{model.FieldPowerUsage, model.FieldProfPCIeTxBytes}

	snap, err := s.Collect(ctx, fields)
	require.NoError(t, err)
	assert.Contains(t, valuesByField(snap.GPUs[1]), model.FieldProfPCIeTxBytes)

	h.fake.set(func(f *fakeDCGM) { f.profBusyRead = true }) // a CUPTI job starts
	for range 3 {
		snap, err = s.Collect(ctx, fields)
		require.NoError(t, err)
		for _, gpu := range snap.GPUs {
			got := valuesByField(gpu)
			assert.Equal(t, 16.365, got[model.FieldPowerUsage].Float, "device fields keep flowing")
			assert.NotContains(t, got, model.FieldProfPCIeTxBytes)
		}
	}
	assert.Equal(t, 1, h.count("profiling fields unavailable"))

	// DCGM lost the watch meanwhile: on resuming it is made again.
	h.fake.set(func(f *fakeDCGM) {
		f.profBusyRead = false
		for key := range f.watches {
			if hasProfiling(f.fieldGroups[key[0]]) {
				delete(f.watches, key)
			}
		}
	})
	h.clock.Advance(30 * time.Second)
	snap, err = s.Collect(ctx, fields)
	require.NoError(t, err)
	for _, gpu := range snap.GPUs {
		assert.Equal(t, int64(112603), valuesByField(gpu)[model.FieldProfPCIeTxBytes].Int)
	}
	assert.Equal(t, 1, h.count("profiling fields available again"))
}
