package dcgmsrc

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
)

var allGPUSystems = []string{semconv.HealthSystemPCIe, semconv.HealthSystemMemory, semconv.HealthSystemInforom,
	semconv.HealthSystemThermal, semconv.HealthSystemPower, semconv.HealthSystemNVLink}

func TestCheckHealthReportsIncidents(t *testing.T) {
	h := newHarness(t, newFakeGPU(t, 0, modelH100), newFakeGPU(t, 1, modelH100))
	h.fake.FakeHealth = NewFakeHealth([]uint{7}, false)
	ctx := context.Background()
	s := started(t, h, Config{})

	rep, err := s.CheckHealth(ctx)
	require.NoError(t, err)
	assert.Equal(t, allGPUSystems, rep.GPUSystems)
	assert.Equal(t, []uint{7}, rep.NVSwitches)
	assert.Equal(t, []string{semconv.HealthSystemNVSwitchFatal, semconv.HealthSystemNVSwitchNonFatal}, rep.NVSwitchSystems)
	require.Len(t, rep.GPUs, 2)
	assert.NotEmpty(t, rep.GPUs[1].UUID, "the GPUs are identified")
	assert.Empty(t, rep.Incidents, "DCGM's first check after setting the watches reports nothing")
	assert.True(t, rep.Baseline)

	sw := uint(7)
	h.fake.SetIncidents(
		FakeIncident{GPU: 1, System: semconv.HealthSystemMemory, Result: model.HealthFail, Code: 4, Message: "Detected 1 volatile double-bit ECC error(s) in GPU 1."},
		FakeIncident{GPU: 0, System: semconv.HealthSystemPCIe, Result: model.HealthWarn, Code: 3, Message: "Detected more than 8 PCIe replays per minute for GPU 0 : 12"},
		FakeIncident{NVSwitch: &sw, System: semconv.HealthSystemNVSwitchFatal, Result: model.HealthFail, Code: 15, Message: "Detected fatal errors on NvSwitch 7"},
		FakeIncident{GPU: 0, System: semconv.HealthSystemPCIe, Result: model.HealthWarn, Code: 999, Message: "a code this build does not know"},
	)
	rep, err = s.CheckHealth(ctx)
	require.NoError(t, err)
	require.Len(t, rep.Incidents, 4)
	assert.False(t, rep.Baseline)
	dbe := rep.Incidents[0]
	assert.Equal(t, rep.GPUs[1], dbe.GPU)
	assert.Equal(t, semconv.HealthSystemMemory, dbe.System)
	assert.Equal(t, model.HealthFail, dbe.Result)
	assert.Equal(t, "DCGM_FR_VOLATILE_DBE_DETECTED", dbe.CodeName)
	assert.Contains(t, dbe.Message, "double-bit")
	assert.Equal(t, model.HealthWarn, rep.Incidents[1].Result)
	assert.Equal(t, "DCGM_FR_PCI_REPLAY_RATE", rep.Incidents[1].CodeName)
	nvs := rep.Incidents[2]
	assert.True(t, nvs.OnNVSwitch)
	assert.Equal(t, uint(7), nvs.NVSwitch)
	assert.Equal(t, "DCGM_FR_NVSWITCH_FATAL_ERROR", nvs.CodeName)
	assert.Equal(t, "DCGM_FR_999", rep.Incidents[3].CodeName)

	sets, checks := h.fake.Calls()
	assert.Equal(t, []int{1, 2}, []int{sets, checks}, "the watches are set once per connection")
	assert.Equal(t, 1, h.fake.Groups())
	require.NoError(t, s.Shutdown(ctx))
	assert.Equal(t, 0, h.fake.Groups(), "a shared nv-hostengine keeps no health group of a stopped source")
}

func TestCheckHealthWithoutNVSwitchWatches(t *testing.T) {
	h := newHarness(t, newFakeGPU(t, 0, modelH100))
	h.fake.FakeHealth = NewFakeHealth([]uint{0, 1}, true)
	ctx := context.Background()
	s := started(t, h, Config{})
	for range 3 {
		rep, err := s.CheckHealth(ctx)
		require.NoError(t, err)
		assert.Equal(t, allGPUSystems, rep.GPUSystems, "the GPU systems are watched all the same")
		assert.Empty(t, rep.NVSwitches)
		assert.Empty(t, rep.NVSwitchSystems)
	}
	assert.Equal(t, 1, h.count("DCGM refused the NVSwitch health watches"), "logged once")
}

func TestCheckHealthOnANodeWithoutNVSwitches(t *testing.T) {
	h := newHarness(t, newFakeGPU(t, 0, modelL4))
	ctx := context.Background()
	s := started(t, h, Config{})
	rep, err := s.CheckHealth(ctx)
	require.NoError(t, err)
	assert.Equal(t, allGPUSystems, rep.GPUSystems)
	assert.Empty(t, rep.NVSwitchSystems)
	assert.Zero(t, h.count("NVSwitch"), "nothing to say where there is no NVSwitch")
}

func TestCheckHealthBeforeStartAndAfterReconnect(t *testing.T) {
	h := newHarness(t, newFakeGPU(t, 0, modelL4))
	ctx := context.Background()
	s := h.source(Config{})
	_, err := s.CheckHealth(ctx)
	require.Error(t, err)
	require.NoError(t, s.Start(ctx, nil))
	t.Cleanup(func() { require.NoError(t, s.Shutdown(ctx)) })
	_, err = s.CheckHealth(ctx)
	require.NoError(t, err)

	h.fake.killEngine()
	_, err = s.CheckHealth(ctx)
	require.Error(t, err, "no check while nv-hostengine is gone")
	h.fake.startEngine(false)
	h.clock.Advance(maxConnectBackoff)
	rep, err := s.CheckHealth(ctx)
	require.NoError(t, err)
	assert.True(t, rep.Baseline, "the first check on the new connection is a baseline again")
	sets, _ := h.fake.Calls()
	assert.Equal(t, 2, sets, "the watches are set again on the new connection")
}

func TestHealthCodeNames(t *testing.T) {
	for code, name := range map[int]string{
		3: "DCGM_FR_PCI_REPLAY_RATE", 4: "DCGM_FR_VOLATILE_DBE_DETECTED", 6: "DCGM_FR_PENDING_PAGE_RETIREMENTS",
		9: "DCGM_FR_CORRUPT_INFOROM", 14: "DCGM_FR_NVLINK_DOWN", 80: "DCGM_FR_ROW_REMAP_FAILURE",
		84: "DCGM_FR_UNCORRECTABLE_ROW_REMAP", -1: "DCGM_FR_-1",
	} {
		assert.Equal(t, name, healthCodeName(code))
	}
}

// While DCGM lists no GPU the check says nothing: a baseline, which clears
// no incident.
func TestCheckHealthWithoutGPUsIsNoNews(t *testing.T) {
	h := newHarness(t)
	s := started(t, h, Config{})
	rep, err := s.CheckHealth(context.Background())
	require.NoError(t, err)
	assert.True(t, rep.Baseline)
	assert.Empty(t, rep.GPUs)
	sets, _ := h.fake.Calls()
	assert.Zero(t, sets, "no group to watch")
}
