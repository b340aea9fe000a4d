package dcgmsrc

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
)

// migIDs returns the MIG ids of a snapshot's samples, nil for whole GPUs,
// with the GPU index of each.
func migIDs(snap model.Snapshot) (indexes []int, migs []*model.MIGInstance) {
	for _, s := range snap.GPUs {
		indexes = append(indexes, s.GPU.Index)
		migs = append(migs, s.GPU.MIG)
	}
	return indexes, migs
}

func TestMIGInstancesAreSamples(t *testing.T) {
	a100 := newFakeMIGGPU(t, 1)
	a100.migs[1].values[model.FieldProfSMActive] = fieldValue{Type: fieldTypeDouble, Float: 0.42}
	a100.migs[1].values[model.FieldFBUsed] = fieldValue{Type: fieldTypeInt64, Int: 4096}
	h := newHarness(t, newFakeGPU(t, 0, modelL4), a100)
	s := started(t, h, Config{CollectionInterval: 15 * time.Second, ProfilingInterval: 45 * time.Second})
	ctx := context.Background()
	snap, err := s.Collect(ctx, allFields())
	require.NoError(t, err)

	// Each GPU, then its instances by GPU instance id (the fixture's 3-6).
	indexes, migs := migIDs(snap)
	assert.Equal(t, []int{0, 1, 1, 1, 1, 1}, indexes)
	profile := "1g.20gb"
	assert.Equal(t, []*model.MIGInstance{nil, nil,
		{GPUInstanceID: 3, Profile: profile}, {GPUInstanceID: 4, Profile: profile},
		{GPUInstanceID: 5, Profile: profile}, {GPUInstanceID: 6, Profile: profile}}, migs)

	parent := snap.GPUs[1]
	assert.Equal(t, model.GPU{
		Index: 1, UUID: "GPU-513536b6-7d19-9063-b049-1e69664bb298", Model: "NVIDIA A100-SXM4-80GB",
		PCIBusID: "00000000:01:00.0", Device: "nvidia1", DriverVersion: "535.54.03",
	}, parent.GPU)
	assert.Equal(t, int64(81920), valuesByField(parent)[model.FieldFBTotal].Int, "the whole GPU's framebuffer")
	assert.Contains(t, valuesByField(parent), model.FieldGPUTemp)

	for i, sample := range snap.GPUs[2:] {
		gpu := sample.GPU
		gpu.MIG = nil
		assert.Equal(t, parent.GPU, gpu, "instance %d carries its parent's identity", i)
		assert.False(t, sample.Unresponsive)
		got := valuesByField(sample)
		used, smActive := int64(12), 0.0
		want := []model.FieldID{model.FieldFBTotal, model.FieldFBUsed, model.FieldFBFree}
		if i == 1 {
			used, smActive = 4096, 0.42
			want = append(want, model.FieldProfSMActive)
		}
		assert.ElementsMatch(t, want, fieldIDsOf(sample), "instance %d: only what DCGM measures per instance; blanks dropped", i)
		assert.Equal(t, int64(19968), got[model.FieldFBTotal].Int)
		assert.Equal(t, int64(19955), got[model.FieldFBFree].Int)
		assert.Equal(t, used, got[model.FieldFBUsed].Int)
		assert.Equal(t, smActive, got[model.FieldProfSMActive].Float)
		assert.True(t, got[model.FieldFBUsed].Time.Equal(h.clock.Now()))
	}
	// The instances are watched as the GPUs are: same field groups, same
	// intervals, one group for the four.
	h.fake.mu.Lock()
	members := map[handle][]uint{}
	every := map[time.Duration]bool{}
	for key, p := range h.fake.watches {
		if m, ok := h.fake.migGroups[key[1]]; ok {
			members[key[1]] = m
			every[p.every] = true
		}
	}
	h.fake.mu.Unlock()
	require.Len(t, members, 1)
	for _, m := range members {
		assert.ElementsMatch(t, []uint{8, 9, 10, 11}, m)
	}
	assert.Equal(t, map[time.Duration]bool{15 * time.Second: true, 45 * time.Second: true}, every)

	// Later collections make nothing new and read the instances once each.
	calls := h.fake.callCount("CreateGPUInstanceGroup") + h.fake.callCount("Watch") + h.fake.callCount("MIGHierarchy")
	reads := h.fake.callCount("GPUInstanceValues")
	snap.GPUs[2].GPU.MIG.Profile = "changed" // a consumer's change stays its own
	snap, err = s.Collect(ctx, allFields())
	require.NoError(t, err)
	assert.Equal(t, profile, snap.GPUs[2].GPU.MIG.Profile)
	assert.Equal(t, calls, h.fake.callCount("CreateGPUInstanceGroup")+h.fake.callCount("Watch")+h.fake.callCount("MIGHierarchy"))
	assert.Equal(t, reads+2, h.fake.callCount("GPUInstanceValues"), "device and profiling fields, one call each for all instances")
	assert.Equal(t, 1, h.count("GPU is in MIG mode"))
}

func fieldIDsOf(s model.GPUSample) []model.FieldID {
	ids := make([]model.FieldID, len(s.Values))
	for i, v := range s.Values {
		ids[i] = v.Field
	}
	return ids
}

func TestGPUWithoutMIGUnchanged(t *testing.T) {
	collect := func(gpus ...*fakeGPU) (*harness, model.Snapshot) {
		h := newHarness(t, gpus...)
		s := started(t, h, Config{})
		snap, err := s.Collect(context.Background(), allFields())
		require.NoError(t, err)
		return h, snap
	}
	_, alone := collect(newFakeGPU(t, 0, modelL4))
	_, mixed := collect(newFakeGPU(t, 0, modelL4), newFakeMIGGPU(t, 1))
	require.Len(t, mixed.GPUs, 6)
	assert.Equal(t, alone.GPUs[0], mixed.GPUs[0], "a MIG neighbour changes nothing for a GPU without MIG")

	// MIG off everywhere: no MIG call beyond the hierarchy, no MIG sample.
	a100 := newFakeMIGGPU(t, 0)
	a100.migs = nil
	h, snap := collect(a100)
	require.Len(t, snap.GPUs, 1)
	assert.Nil(t, snap.GPUs[0].GPU.MIG)
	assert.Equal(t, 1, h.fake.callCount("MIGHierarchy"))
	assert.Zero(t, h.fake.callCount("CreateGPUInstanceGroup")+h.fake.callCount("GPUInstanceValues"))
	fg, groups, watches := h.fake.objects()
	assert.Equal(t, []int{2, 1, 2}, []int{fg, groups, watches}, "as before MIG support")
	assert.Zero(t, h.count("MIG"))
}

func TestMIGLayoutChangeAfterReconnect(t *testing.T) {
	h := newHarness(t, newFakeMIGGPU(t, 0))
	s := started(t, h, Config{})
	ctx := context.Background()
	fields := []model.FieldID{model.FieldGPUTemp, model.FieldFBUsed, model.FieldProfSMActive}
	snap, err := s.Collect(ctx, fields)
	require.NoError(t, err)
	require.Len(t, snap.GPUs, 5)

	// nv-hostengine goes; meanwhile the GPU is re-partitioned into two
	// 3g.40gb instances (GPU instances 1 and 2 on an A100 80GB).
	h.fake.killEngine()
	_, err = s.Collect(ctx, fields)
	require.Error(t, err)
	h.fake.set(func(f *fakeDCGM) {
		f.gpus[0].migs = []*fakeGPUInstance{
			{entity: 1, instanceID: 2, computeIDs: []uint{0}, profile: "3g.40gb",
				values: map[model.FieldID]fieldValue{model.FieldFBUsed: {Type: fieldTypeInt64, Int: 2222}}},
			{entity: 0, instanceID: 1, computeIDs: []uint{0}, profile: "3g.40gb",
				values: map[model.FieldID]fieldValue{model.FieldFBUsed: {Type: fieldTypeInt64, Int: 1111}}},
		}
	})
	h.fake.startEngine(false)
	h.clock.Advance(time.Second)
	snap, err = s.Collect(ctx, fields)
	require.NoError(t, err)
	_, migs := migIDs(snap)
	assert.Equal(t, []*model.MIGInstance{nil,
		{GPUInstanceID: 1, Profile: "3g.40gb"}, {GPUInstanceID: 2, Profile: "3g.40gb"}}, migs)
	assert.Equal(t, int64(1111), valuesByField(snap.GPUs[1])[model.FieldFBUsed].Int)
	assert.Equal(t, int64(2222), valuesByField(snap.GPUs[2])[model.FieldFBUsed].Int)
	fg, groups, watches := h.fake.objects()
	assert.Equal(t, []int{2, 2, 4}, []int{fg, groups, watches}, "the GPU's and the instances' groups, made again")

	// And MIG turned off, found at the next reconnect.
	h.fake.killEngine()
	_, err = s.Collect(ctx, fields)
	require.Error(t, err)
	h.fake.set(func(f *fakeDCGM) { f.gpus[0].migs = nil })
	h.fake.startEngine(false)
	h.clock.Advance(time.Minute)
	snap, err = s.Collect(ctx, fields)
	require.NoError(t, err)
	require.Len(t, snap.GPUs, 1)
	assert.Nil(t, snap.GPUs[0].GPU.MIG)
	assert.Equal(t, 2, h.count("GPU is in MIG mode"), "once per connection that found MIG")
}

func TestMIGHierarchyErrors(t *testing.T) {
	h := newHarness(t, newFakeMIGGPU(t, 0))
	h.fake.set(func(f *fakeDCGM) { f.migErr = &statusError{Code: -24, Msg: "NVML doesn't exist on this system"} })
	s := started(t, h, Config{})
	ctx := context.Background()
	for range 2 {
		snap, err := s.Collect(ctx, []model.FieldID{model.FieldGPUTemp})
		require.NoError(t, err, "whole GPUs are still read")
		require.Len(t, snap.GPUs, 1)
		assert.Equal(t, int64(31), valuesByField(snap.GPUs[0])[model.FieldGPUTemp].Int)
	}
	assert.Equal(t, 1, h.count("Could not read DCGM's MIG hierarchy"))

	// A connection lost while listing is a lost connection.
	h2 := newHarness(t, newFakeMIGGPU(t, 0))
	h2.fake.set(func(f *fakeDCGM) { f.migErr = errors.New("error retrieving DCGM MIG hierarchy: " + msgConnection) })
	s2 := started(t, h2, Config{})
	_, err := s2.Collect(ctx, []model.FieldID{model.FieldGPUTemp})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "dcgmreceiver: dcgm: listing MIG instances")
	assert.Equal(t, 1, h2.count("Lost the connection to DCGM"))
}

func TestMIGReadFailureKeepsParent(t *testing.T) {
	h := newHarness(t, newFakeMIGGPU(t, 0))
	s := started(t, h, Config{})
	ctx := context.Background()
	fields := []model.FieldID{model.FieldGPUTemp, model.FieldFBUsed}
	h.fake.set(func(f *fakeDCGM) { f.migReadErr = &statusError{Code: -2, Msg: "Bad parameter passed to function"} })
	for range 2 {
		snap, err := s.Collect(ctx, fields)
		require.NoError(t, err)
		require.Len(t, snap.GPUs, 5)
		assert.Equal(t, int64(31), valuesByField(snap.GPUs[0])[model.FieldGPUTemp].Int)
		for _, m := range snap.GPUs[1:] {
			assert.NotNil(t, m.GPU.MIG)
			assert.Empty(t, m.Values)
			assert.False(t, m.Unresponsive)
		}
	}
	assert.Equal(t, 1, h.count("Reading the MIG instances of GPU failed"))

	h.fake.set(func(f *fakeDCGM) { f.migReadErr = nil })
	snap, err := s.Collect(ctx, fields)
	require.NoError(t, err)
	assert.Equal(t, int64(12), valuesByField(snap.GPUs[1])[model.FieldFBUsed].Int)
	assert.Equal(t, 1, h.count("MIG instances of GPU answer again"))

	// Losing the connection while reading them is a lost connection.
	h.fake.set(func(f *fakeDCGM) { f.migReadErr = errors.New(msgConnection) })
	_, err = s.Collect(ctx, fields)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "reading the MIG instances of GPU 0")
}

func TestMIGHungGPU(t *testing.T) {
	h := newHarness(t, newFakeMIGGPU(t, 0))
	s := started(t, h, Config{CallTimeout: 50 * time.Millisecond})
	ctx := context.Background()
	fields := []model.FieldID{model.FieldFBUsed}
	_, err := s.Collect(ctx, fields)
	require.NoError(t, err)

	release := h.fake.hang(0)
	snap, err := s.Collect(ctx, fields)
	require.NoError(t, err)
	require.Len(t, snap.GPUs, 5)
	for _, sample := range snap.GPUs {
		assert.True(t, sample.Unresponsive, "the instances hang with their GPU")
		assert.Empty(t, sample.Values)
		assert.Equal(t, "GPU-513536b6-7d19-9063-b049-1e69664bb298", sample.GPU.UUID)
	}
	release()
	require.NoError(t, s.guard.Wait(ctx))
	snap, err = s.Collect(ctx, fields)
	require.NoError(t, err)
	assert.False(t, snap.GPUs[4].Unresponsive)
	assert.Equal(t, int64(12), valuesByField(snap.GPUs[4])[model.FieldFBUsed].Int)
}

func TestMIGProfilingRefused(t *testing.T) {
	a100 := newFakeMIGGPU(t, 0)
	a100.migs[0].values[model.FieldProfSMActive] = fieldValue{Type: fieldTypeDouble, Float: 0.5}
	h := newHarness(t, a100)
	s := started(t, h, Config{ProfilingInterval: 30 * time.Second})
	ctx := context.Background()
	fields := []model.FieldID{model.FieldFBUsed, model.FieldProfSMActive}

	h.fake.set(func(f *fakeDCGM) { f.profBusyRead = true }) // a CUPTI job holds the counters
	snap, err := s.Collect(ctx, fields)
	require.NoError(t, err)
	got := valuesByField(snap.GPUs[1])
	assert.Equal(t, int64(12), got[model.FieldFBUsed].Int, "the instances' device fields keep flowing")
	assert.NotContains(t, got, model.FieldProfSMActive)
	assert.Equal(t, 1, h.count("profiling fields unavailable"))

	h.fake.set(func(f *fakeDCGM) { f.profBusyRead = false })
	h.clock.Advance(30 * time.Second)
	snap, err = s.Collect(ctx, fields)
	require.NoError(t, err)
	assert.Equal(t, 0.5, valuesByField(snap.GPUs[1])[model.FieldProfSMActive].Float)
	assert.Equal(t, 1, h.count("profiling fields available again"))
}

func TestShutdownRemovesMIGGroups(t *testing.T) {
	h := newHarness(t, newFakeMIGGPU(t, 0))
	s := h.source(Config{})
	ctx := context.Background()
	require.NoError(t, s.Start(ctx, nil))
	_, err := s.Collect(ctx, allFields())
	require.NoError(t, err)
	fg, groups, watches := h.fake.objects()
	assert.Equal(t, []int{2, 2, 4}, []int{fg, groups, watches})
	require.NoError(t, s.Shutdown(ctx))
	fg, groups, watches = h.fake.objects()
	assert.Equal(t, []int{0, 0, 0}, []int{fg, groups, watches})
}

func TestMIGInstancesOf(t *testing.T) {
	hierarchy := []gpuInstance{
		{Entity: 9, GPU: 1, InstanceID: 2, ComputeInstanceIDs: []uint{0, 1}, Profile: "3g.40gb"},
		{Entity: 10, GPU: 1, InstanceID: 1, ComputeInstanceIDs: []uint{3}, Profile: "NVIDIA A100-SXM4-80GB MIG 3g.40gb"},
		{Entity: 10, GPU: 1, InstanceID: 1, ComputeInstanceIDs: []uint{3}}, // listed twice
		{Entity: 11, GPU: 1, InstanceID: 5, Profile: "<<<NOT_SUPPORTED>>>"},
		{Entity: 0, GPU: 0, InstanceID: 7, ComputeInstanceIDs: []uint{0}, Profile: "1g.10gb"},
	}
	got := migInstancesOf(1, hierarchy)
	assert.Equal(t, []migInstance{
		{entity: 10, id: model.MIGInstance{GPUInstanceID: 1, ComputeInstanceID: 3, Profile: "3g.40gb"}},
		{entity: 9, id: model.MIGInstance{GPUInstanceID: 2, Profile: "3g.40gb"}}, // two compute instances: 0
		{entity: 11, id: model.MIGInstance{GPUInstanceID: 5}},                    // none: 0; sentinel name: no profile
	}, got)
	assert.Empty(t, migInstancesOf(2, hierarchy))
	assert.Empty(t, migInstancesOf(0, nil))
	assert.Equal(t, []string{"GI 1 CI 3 3g.40gb", "GI 2 CI 0 3g.40gb", "GI 5 CI 0 "}, migNames(got))
}

func TestMIGProfile(t *testing.T) {
	for name, want := range map[string]string{
		"1g.10gb":                              "1g.10gb",
		" 3g.40gb ":                            "3g.40gb",
		"NVIDIA H100 80GB HBM3 MIG 1g.10gb":    "1g.10gb",
		"NVIDIA A100-SXM4-40GB MIG 1c.2g.10gb": "1c.2g.10gb",
		"":                                     "",
		"<<<NULL>>>":                           "",
		"<<<NOT_SUPPORTED>>>":                  "",
	} {
		assert.Equal(t, want, migProfile(name), name)
	}
}
