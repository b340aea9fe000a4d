package dcgmsrc

import (
	"context"
	"testing"
	"time"

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

func TestConfigDefaults(t *testing.T) {
	assert.Equal(t, Config{
		Mode: ModeStandalone, Endpoint: DefaultEndpoint,
		CollectionInterval: 10 * time.Second, ProfilingInterval: 30 * time.Second,
		XIDPollInterval: time.Second, CallTimeout: 5 * time.Second,
	}, Config{}.withDefaults())
	assert.Empty(t, Config{Mode: ModeEmbedded}.withDefaults().Endpoint)
}
