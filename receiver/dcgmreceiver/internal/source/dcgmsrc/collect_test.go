package dcgmsrc

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
)

func TestCollectReadsRealL4Values(t *testing.T) {
	h := newHarness(t, newFakeGPU(t, 0, modelL4))
	s := started(t, h, Config{CollectionInterval: 15 * time.Second, ProfilingInterval: 45 * time.Second})
	snap, err := s.Collect(context.Background(), allFields())
	require.NoError(t, err)
	assert.Equal(t, h.clock.Now(), snap.Time)
	require.Len(t, snap.GPUs, 1)
	gpu := snap.GPUs[0]
	assert.Equal(t, model.GPU{
		Index: 0, UUID: "GPU-c2f76b33-7953-256e-8f33-1343419b1a1c", Model: "NVIDIA L4",
		PCIBusID: "00000000:31:00.0", Device: "nvidia0", DriverVersion: "580.105.08",
	}, gpu.GPU)
	assert.False(t, gpu.Unresponsive)

	// Every value of the real scrape comes through, typed as DCGM typed it
	// and stamped with DCGM's sample time.
	got := valuesByField(gpu)
	want := readScrape(t, l4Scrape).values
	for id, w := range want {
		v, ok := got[id]
		if !assert.True(t, ok, "field %d missing", id) {
			continue
		}
		assert.Equal(t, w.Type == fieldTypeDouble, v.IsFloat, "field %d", id)
		assert.Equal(t, w.Int, v.Int, "field %d", id)
		assert.Equal(t, w.Float, v.Float, "field %d", id)
		assert.True(t, v.Time.Equal(h.clock.Now()), "field %d time", id)
	}
	assert.Equal(t, 16.365, got[model.FieldPowerUsage].Float)
	assert.Equal(t, int64(112603), got[model.FieldProfPCIeTxBytes].Int)
	assert.Len(t, got, len(want), "no field without a real value (blank, not supported) is emitted")
	_, hasDriver := got[model.FieldDriverVersion]
	assert.False(t, hasDriver, "the driver version is part of the GPU, not a value")

	// Watches follow the intervals the receiver uses.
	h.fake.mu.Lock()
	devWatch, ok := h.fake.watchedOn(0, model.FieldGPUTemp)
	require.True(t, ok)
	profWatch, ok := h.fake.watchedOn(0, model.FieldProfSMActive)
	require.True(t, ok)
	h.fake.mu.Unlock()
	assert.Equal(t, 15*time.Second, devWatch.every)
	assert.Equal(t, 45*time.Second, profWatch.every)
	assert.Equal(t, 1, devWatch.keepSamples)

	// A second collection reuses the field groups and watches.
	before := h.fake.callCount("CreateFieldGroup") + h.fake.callCount("Watch") + h.fake.callCount("DeviceInfo")
	_, err = s.Collect(context.Background(), allFields())
	require.NoError(t, err)
	assert.Equal(t, before, h.fake.callCount("CreateFieldGroup")+h.fake.callCount("Watch")+h.fake.callCount("DeviceInfo"))
	fg, groups, watches := h.fake.objects()
	assert.Equal(t, []int{2, 1, 2}, []int{fg, groups, watches}, "one device and one profiling field group, one GPU group")
}

func TestSentinelsAreNeverEmitted(t *testing.T) {
	p4 := newFakeGPU(t, 0, modelP4)
	// DCGM_FI_DEV_MEMORY_TEMP as dcgm-exporter's README shows it leaking.
	p4.values = readScrape(t, l4Scrape).values
	p4.values[model.FieldMemoryTemp] = readScrape(t, snippet).values[model.FieldMemoryTemp]
	p4.values[model.FieldFBTotal] = fieldValue{Type: fieldTypeInt64, Int: model.Int64Blank + 3}
	h := newHarness(t, p4)
	s := started(t, h, Config{})
	snap, err := s.Collect(context.Background(), allFields())
	require.NoError(t, err)
	got := valuesByField(snap.GPUs[0])
	for _, v := range got {
		assert.False(t, model.IsBlankInt64(v.Int), "field %d", v.Field)
		assert.False(t, model.IsBlankFloat64(v.Float), "field %d", v.Field)
	}
	for _, id := range []model.FieldID{
		model.FieldMemoryTemp,          // the README's NOT_SUPPORTED value
		model.FieldFBTotal,             // NOT_PERMISSIONED
		model.FieldBoardLimitViolation, // unsupported on a P4 (Google's list)
		model.FieldECCDBEAggTotal,      // blank: no data
	} {
		assert.NotContains(t, got, id)
	}
	assert.Contains(t, got, model.FieldGPUTemp)
}

func TestUnsupportedProfilingFieldsPerModel(t *testing.T) {
	for _, name := range []string{modelL4, modelP4, modelA100, modelH100} {
		t.Run(name, func(t *testing.T) {
			sup := readSupport(t, name)
			var requested, unsupported []model.FieldID
			for _, id := range fieldIDs(t, append(append([]string{}, sup.Supported...), sup.Unsupported...)) {
				if f, _ := model.FieldByID(id); f.Profiling {
					requested = append(requested, id)
				}
			}
			for _, id := range fieldIDs(t, sup.Unsupported) {
				if f, _ := model.FieldByID(id); f.Profiling {
					unsupported = append(unsupported, id)
				}
			}
			h := newHarness(t, newFakeGPU(t, 0, name), newFakeGPU(t, 1, name))
			s := started(t, h, Config{})
			fields := append([]model.FieldID{model.FieldGPUTemp}, requested...)
			var snap model.Snapshot
			for range 3 {
				var err error
				snap, err = s.Collect(context.Background(), fields)
				require.NoError(t, err)
			}
			require.Len(t, snap.GPUs, 2)
			for _, gpu := range snap.GPUs {
				got := valuesByField(gpu)
				assert.Contains(t, got, model.FieldGPUTemp)
				for _, id := range unsupported {
					assert.NotContains(t, got, id)
				}
			}

			// One line per GPU, naming the fields, however many collections.
			lines := h.logs.FilterMessageSnippet("does not support some profiling fields").All()
			if len(unsupported) == 0 {
				assert.Empty(t, lines)
				return
			}
			require.Len(t, lines, 2)
			assert.ElementsMatch(t, fieldNames(unsupported), lines[0].ContextMap()["fields"])
			if len(unsupported) == len(requested) {
				// Older GPUs (a P4) support none: no profiling watch at all.
				assert.Zero(t, h.fake.callCount("Watch")-2, "only the device watches")
			}
		})
	}
}

func TestCollectHonoursContext(t *testing.T) {
	h := newHarness(t, newFakeGPU(t, 0, modelL4))
	s := started(t, h, Config{})
	release := h.fake.hang(0)
	defer func() { release(); require.NoError(t, s.guard.Wait(context.Background())) }()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.Collect(ctx, []model.FieldID{model.FieldGPUTemp})
	require.ErrorIs(t, err, context.Canceled)
}

func TestSplitFields(t *testing.T) {
	device, profiling := splitFields([]model.FieldID{
		model.FieldProfSMActive, model.FieldGPUTemp, model.FieldDriverVersion,
		model.FieldGPUTemp, 1040, 9999, model.FieldXIDErrors,
	})
	assert.Equal(t, []model.FieldID{model.FieldGPUTemp, model.FieldXIDErrors, 9999}, device)
	assert.Equal(t, []model.FieldID{model.FieldProfSMActive, 1040}, profiling)
}
