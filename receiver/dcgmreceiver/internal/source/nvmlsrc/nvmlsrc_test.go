package nvmlsrc

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/hang"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/source"
)

// testTimeout is the per-call deadline in tests: generous for a loaded
// machine, short enough for the hang tests.
const testTimeout = 250 * time.Millisecond

// telemetry is what one mock GPU reports. Values differ per GPU so that a
// reading attributed to the wrong GPU shows.
type telemetry struct {
	smClock, memClock uint32
	reasons           uint64
	memTemp, gpuTemp  uint32
	powerMW, limitMW  uint32
	energyMJ          uint64
	replays           int
	util              nvml.Utilization
	enc, dec          uint32
	violationNS       map[nvml.PerfPolicyType]uint64
	memory            nvml.Memory_v2
	eccSBEVol         uint64
	eccDBEVol         uint64
	eccSBEAgg         uint64
	eccDBEAgg         uint64
	retiredSBE        int
	retiredDBE        int
	retiredPending    bool
	remapCorr         int
	remapUnc          int
	remapFailed       bool
	// nvlinkUp says, per link, whether it is active; each active link
	// reports flit errors link+flitBase, 2 data CRC errors, 1 replay, 0
	// recoveries.
	nvlinkUp []bool
	flitBase uint64
}

const mib = 1 << 20

func telemetryFor(i int) telemetry {
	u := uint32(i)
	total := uint64(40960) * mib
	reserved := uint64(500+i) * mib
	used := uint64(1000*i) * mib
	links := make([]bool, 12)
	for l := range links {
		links[l] = l%4 != 3 // links 3, 7 and 11 are down
	}
	return telemetry{
		smClock: 1410 - u, memClock: 1593,
		reasons: 1 << uint(i),
		memTemp: 40 + u, gpuTemp: 30 + u,
		powerMW: 60000 + 1234*u, limitMW: 400000,
		energyMJ: 1_000_000_000 + uint64(i),
		replays:  2 * i,
		util:     nvml.Utilization{Gpu: 90 + u, Memory: 40 + u},
		enc:      u, dec: 2 * u,
		violationNS: map[nvml.PerfPolicyType]uint64{
			nvml.PERF_POLICY_POWER: 1000 + uint64(i), nvml.PERF_POLICY_THERMAL: 2000 + uint64(i),
			nvml.PERF_POLICY_SYNC_BOOST: 3000, nvml.PERF_POLICY_BOARD_LIMIT: 4000,
			nvml.PERF_POLICY_LOW_UTILIZATION: 5000, nvml.PERF_POLICY_RELIABILITY: 6000,
			nvml.PERF_POLICY_TOTAL_APP_CLOCKS: 7000, nvml.PERF_POLICY_TOTAL_BASE_CLOCKS: 8000,
		},
		memory:    nvml.Memory_v2{Total: total, Reserved: reserved, Used: used, Free: total - reserved - used},
		eccSBEVol: uint64(i), eccDBEVol: uint64(i % 2), eccSBEAgg: uint64(i) + 10, eccDBEAgg: uint64(i%2) + 10,
		retiredSBE: i, retiredDBE: i % 2, retiredPending: i == 5,
		remapCorr: i, remapUnc: i % 3, remapFailed: i == 7,
		nvlinkUp: links, flitBase: uint64(i),
	}
}

// expectedValues is what Collect must report for telemetryFor(i), with
// DCGM's units: power in W, memory in MiB, violations in ns.
func expectedValues(i int) map[model.FieldID]model.Value {
	tm := telemetryFor(i)
	ints := map[model.FieldID]int64{
		model.FieldSMClock: int64(tm.smClock), model.FieldMemClock: int64(tm.memClock),
		model.FieldClocksEventReasons: int64(tm.reasons),
		model.FieldMemoryTemp:         int64(tm.memTemp), model.FieldGPUTemp: int64(tm.gpuTemp),
		model.FieldTotalEnergy:       int64(tm.energyMJ),
		model.FieldPCIeReplayCounter: int64(tm.replays),
		model.FieldGPUUtil:           int64(tm.util.Gpu), model.FieldMemCopyUtil: int64(tm.util.Memory),
		model.FieldEncUtil: int64(tm.enc), model.FieldDecUtil: int64(tm.dec),
		model.FieldPowerViolation: 1000 + int64(i), model.FieldThermalViolation: 2000 + int64(i),
		model.FieldSyncBoostViolation: 3000, model.FieldBoardLimitViolation: 4000,
		model.FieldLowUtilViolation: 5000, model.FieldReliabilityViol: 6000,
		model.FieldAppClocksViolation: 7000, model.FieldBaseClocksViolation: 8000,
		model.FieldFBTotal: 40960, model.FieldFBReserved: 500 + int64(i), model.FieldFBUsed: 1000 * int64(i),
		model.FieldFBFree:         40960 - 500 - int64(i) - 1000*int64(i),
		model.FieldECCSBEVolTotal: int64(i), model.FieldECCDBEVolTotal: int64(i % 2),
		model.FieldECCSBEAggTotal: int64(i) + 10, model.FieldECCDBEAggTotal: int64(i%2) + 10,
		model.FieldRetiredSBE: int64(i), model.FieldRetiredDBE: int64(i % 2), model.FieldRetiredPending: boolInt(i == 5),
		model.FieldCorrectableRemap: int64(i), model.FieldUncorrectableRemap: int64(i % 3), model.FieldRowRemapFailure: boolInt(i == 7),
		// Active links 0,1,2,4,5,6,8,9,10: flit errors sum to 45 + 9*i.
		model.FieldNVLinkCRCFlitErrors: 45 + 9*int64(i), model.FieldNVLinkCRCDataErrors: 18,
		model.FieldNVLinkReplayErrors: 9, model.FieldNVLinkRecoveryErrs: 0,
	}
	want := map[model.FieldID]model.Value{}
	for id, v := range ints {
		want[id] = model.Value{Field: id, Int: v}
	}
	want[model.FieldPowerUsage] = model.Value{Field: model.FieldPowerUsage, Float: 60 + 1.234*float64(i), IsFloat: true}
	want[model.FieldPowerMgmtLimit] = model.Value{Field: model.FieldPowerMgmtLimit, Float: 400, IsFloat: true}
	return want
}

// setTelemetry installs tm as the readings of a mock GPU.
func setTelemetry(d *server.Device, tm telemetry) {
	d.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
		// The mock leaves the bus id out; NVML fills it in.
		var p nvml.PciInfo
		for i, c := range []byte(d.PciBusID) {
			p.BusId[i] = int8(c)
		}
		return p, nvml.SUCCESS
	}
	d.GetClockInfoFunc = func(ct nvml.ClockType) (uint32, nvml.Return) {
		switch ct {
		case nvml.CLOCK_SM:
			return tm.smClock, nvml.SUCCESS
		case nvml.CLOCK_MEM:
			return tm.memClock, nvml.SUCCESS
		}
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	d.GetCurrentClocksEventReasonsFunc = func() (uint64, nvml.Return) { return tm.reasons, nvml.SUCCESS }
	d.GetFieldValuesFunc = func(vals []nvml.FieldValue) nvml.Return {
		for i := range vals {
			if vals[i].FieldId != nvml.FI_DEV_MEMORY_TEMP {
				vals[i].NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
				continue
			}
			vals[i].ValueType = uint32(nvml.VALUE_TYPE_UNSIGNED_INT)
			binary.LittleEndian.PutUint32(vals[i].Value[:], tm.memTemp)
			vals[i].NvmlReturn = uint32(nvml.SUCCESS)
		}
		return nvml.SUCCESS
	}
	d.GetTemperatureFunc = func(s nvml.TemperatureSensors) (uint32, nvml.Return) {
		if s != nvml.TEMPERATURE_GPU {
			return 0, nvml.ERROR_INVALID_ARGUMENT
		}
		return tm.gpuTemp, nvml.SUCCESS
	}
	d.GetPowerUsageFunc = func() (uint32, nvml.Return) { return tm.powerMW, nvml.SUCCESS }
	d.GetPowerManagementLimitFunc = func() (uint32, nvml.Return) { return tm.limitMW, nvml.SUCCESS }
	d.GetTotalEnergyConsumptionFunc = func() (uint64, nvml.Return) { return tm.energyMJ, nvml.SUCCESS }
	d.GetPcieReplayCounterFunc = func() (int, nvml.Return) { return tm.replays, nvml.SUCCESS }
	d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return tm.util, nvml.SUCCESS }
	d.GetEncoderUtilizationFunc = func() (uint32, uint32, nvml.Return) { return tm.enc, 167000, nvml.SUCCESS }
	d.GetDecoderUtilizationFunc = func() (uint32, uint32, nvml.Return) { return tm.dec, 167000, nvml.SUCCESS }
	d.GetViolationStatusFunc = func(p nvml.PerfPolicyType) (nvml.ViolationTime, nvml.Return) {
		ns, ok := tm.violationNS[p]
		if !ok {
			return nvml.ViolationTime{}, nvml.ERROR_NOT_SUPPORTED
		}
		return nvml.ViolationTime{ReferenceTime: 1, ViolationTime: ns}, nvml.SUCCESS
	}
	d.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) { return tm.memory, nvml.SUCCESS }
	d.GetTotalEccErrorsFunc = func(e nvml.MemoryErrorType, c nvml.EccCounterType) (uint64, nvml.Return) {
		switch {
		case e == nvml.MEMORY_ERROR_TYPE_CORRECTED && c == nvml.VOLATILE_ECC:
			return tm.eccSBEVol, nvml.SUCCESS
		case e == nvml.MEMORY_ERROR_TYPE_UNCORRECTED && c == nvml.VOLATILE_ECC:
			return tm.eccDBEVol, nvml.SUCCESS
		case e == nvml.MEMORY_ERROR_TYPE_CORRECTED && c == nvml.AGGREGATE_ECC:
			return tm.eccSBEAgg, nvml.SUCCESS
		case e == nvml.MEMORY_ERROR_TYPE_UNCORRECTED && c == nvml.AGGREGATE_ECC:
			return tm.eccDBEAgg, nvml.SUCCESS
		}
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	d.GetRetiredPagesFunc = func(cause nvml.PageRetirementCause) ([]uint64, nvml.Return) {
		n := tm.retiredSBE
		if cause == nvml.PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR {
			n = tm.retiredDBE
		}
		pages := make([]uint64, n)
		for i := range pages {
			pages[i] = 0x1000 * uint64(i+1)
		}
		return pages, nvml.SUCCESS
	}
	d.GetRetiredPagesPendingStatusFunc = func() (nvml.EnableState, nvml.Return) {
		if tm.retiredPending {
			return nvml.FEATURE_ENABLED, nvml.SUCCESS
		}
		return nvml.FEATURE_DISABLED, nvml.SUCCESS
	}
	d.GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) {
		return tm.remapCorr, tm.remapUnc, false, tm.remapFailed, nvml.SUCCESS
	}
	d.GetNvLinkStateFunc = func(link int) (nvml.EnableState, nvml.Return) {
		if link < 0 || link >= len(tm.nvlinkUp) {
			return 0, nvml.ERROR_INVALID_ARGUMENT
		}
		if tm.nvlinkUp[link] {
			return nvml.FEATURE_ENABLED, nvml.SUCCESS
		}
		return nvml.FEATURE_DISABLED, nvml.SUCCESS
	}
	d.GetNvLinkErrorCounterFunc = func(link int, c nvml.NvLinkErrorCounter) (uint64, nvml.Return) {
		if link < 0 || link >= len(tm.nvlinkUp) || !tm.nvlinkUp[link] {
			return 0, nvml.ERROR_INVALID_ARGUMENT
		}
		switch c {
		case nvml.NVLINK_ERROR_DL_CRC_FLIT:
			return uint64(link) + tm.flitBase, nvml.SUCCESS
		case nvml.NVLINK_ERROR_DL_CRC_DATA:
			return 2, nvml.SUCCESS
		case nvml.NVLINK_ERROR_DL_REPLAY:
			return 1, nvml.SUCCESS
		case nvml.NVLINK_ERROR_DL_RECOVERY:
			return 0, nvml.SUCCESS
		}
		return 0, nvml.ERROR_NOT_SUPPORTED
	}
	d.RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { return nvml.SUCCESS }
}

// newServer returns the 8-GPU DGX A100 mock with telemetryFor(i) on GPU i.
func newServer() *server.Server {
	srv := dgxa100.New()
	for i := range srv.Devices {
		setTelemetry(mockDevice(srv, i), telemetryFor(i))
	}
	return srv
}

func mockDevice(srv *server.Server, i int) *server.Device {
	return srv.Devices[i].(*server.Device)
}

// startSource starts a source on lib; the test must shut it down.
func startSource(t *testing.T, lib nvml.Interface, sink source.XIDSink) *Source {
	t.Helper()
	s := New(lib, testTimeout, zaptest.NewLogger(t))
	s.xidWait = 10 * time.Millisecond
	require.NoError(t, s.Start(context.Background(), sink))
	return s
}

func shutdown(t *testing.T, s *Source) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, s.Shutdown(ctx))
}

// allFields is every catalogue field, profiling ones included.
func allFields() []model.FieldID {
	ids := make([]model.FieldID, 0, len(model.Catalogue))
	for _, f := range model.Catalogue {
		ids = append(ids, f.ID)
	}
	return ids
}

func byField(values []model.Value) map[model.FieldID]model.Value {
	m := make(map[model.FieldID]model.Value, len(values))
	for _, v := range values {
		m[v.Field] = v
	}
	return m
}

func TestNewDefaults(t *testing.T) {
	s := New(dgxa100.New(), 0, nil)
	assert.Equal(t, DefaultCallTimeout, s.callTimeout)
	assert.NotNil(t, s.logger)
	s = New(dgxa100.New(), time.Second, nil)
	assert.Equal(t, time.Second, s.callTimeout)
}

func TestStartEnumeratesGPUs(t *testing.T) {
	srv := newServer()
	s := startSource(t, srv, nil)
	defer shutdown(t, s)

	snap, err := s.Collect(context.Background(), []model.FieldID{model.FieldGPUTemp})
	require.NoError(t, err)
	require.Len(t, snap.GPUs, 8)
	for i, sample := range snap.GPUs {
		d := mockDevice(srv, i)
		assert.Equal(t, model.GPU{
			Index:         i,
			UUID:          d.UUID,
			Model:         "Mock NVIDIA A100-SXM4-40GB",
			PCIBusID:      "00000000:0" + string(rune('0'+i)) + ":00.0",
			Device:        "nvidia" + string(rune('0'+i)),
			DriverVersion: "550.54.15",
		}, sample.GPU)
		assert.False(t, sample.Unresponsive)
	}

	// A second Start on a started source does nothing.
	require.NoError(t, s.Start(context.Background(), nil))
	assert.Len(t, srv.InitCalls(), 1)
}

func TestStartInitFailure(t *testing.T) {
	for _, tc := range []struct {
		ret  nvml.Return
		hint string
	}{
		{nvml.ERROR_LIBRARY_NOT_FOUND, "libnvidia-ml.so.1 not found"},
		{nvml.ERROR_DRIVER_NOT_LOADED, "kernel driver not loaded"},
		{nvml.ERROR_NO_PERMISSION, "no permission"},
		{nvml.ERROR_LIB_RM_VERSION_MISMATCH, "versions differ"},
		{nvml.ERROR_UNKNOWN, "dcgmreceiver: nvml: init"},
	} {
		t.Run(tc.ret.Error(), func(t *testing.T) {
			srv := newServer()
			srv.InitFunc = func() nvml.Return { return tc.ret }
			s := New(srv, testTimeout, zaptest.NewLogger(t))

			err := s.Start(context.Background(), nil)
			require.ErrorIs(t, err, tc.ret)
			assert.ErrorContains(t, err, tc.hint)
			_, err = s.Collect(context.Background(), allFields())
			assert.ErrorContains(t, err, "not started")
			assert.Empty(t, srv.ShutdownCalls(), "nothing to shut down after a failed init")

			// The receiver retries; once NVML is there, Start succeeds.
			srv.InitFunc = func() nvml.Return { return nvml.SUCCESS }
			require.NoError(t, s.Start(context.Background(), nil))
			shutdown(t, s)
			assert.Len(t, srv.ShutdownCalls(), 1)
		})
	}
}

func TestStartEnumerationFailureShutsNVMLDown(t *testing.T) {
	srv := newServer()
	srv.DeviceGetCountFunc = func() (int, nvml.Return) { return 0, nvml.ERROR_UNKNOWN }
	s := New(srv, testTimeout, zaptest.NewLogger(t))

	err := s.Start(context.Background(), nil)
	require.ErrorIs(t, err, nvml.ERROR_UNKNOWN)
	assert.ErrorContains(t, err, "counting GPUs")
	assert.Len(t, srv.ShutdownCalls(), 1, "Init's reference must be released")
}

func TestStartSkipsGPUsNVMLCannotOpen(t *testing.T) {
	srv := newServer()
	srv.DeviceGetHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		if i == 2 {
			return nil, nvml.ERROR_GPU_IS_LOST
		}
		return srv.Devices[i], nvml.SUCCESS
	}
	s := startSource(t, srv, nil)
	defer shutdown(t, s)

	snap, err := s.Collect(context.Background(), []model.FieldID{model.FieldGPUTemp})
	require.NoError(t, err)
	require.Len(t, snap.GPUs, 7)
	for _, sample := range snap.GPUs {
		assert.NotEqual(t, 2, sample.GPU.Index)
	}
}

func TestStartInitHangs(t *testing.T) {
	srv := newServer()
	release := make(chan struct{})
	srv.InitFunc = func() nvml.Return { <-release; return nvml.SUCCESS }
	s := New(srv, 20*time.Millisecond, zaptest.NewLogger(t))

	err := s.Start(context.Background(), nil)
	require.ErrorIs(t, err, hang.ErrStuck)
	// A retry while Init is still stuck fails at once, without a second call.
	err = s.Start(context.Background(), nil)
	require.ErrorIs(t, err, hang.ErrStuck)
	assert.Len(t, srv.InitCalls(), 1)

	close(release)
	require.NoError(t, s.guard.Wait(context.Background()))
	// The stuck Init did take a reference; Start is free to init again.
	srv.InitFunc = func() nvml.Return { return nvml.SUCCESS }
	s.callTimeout = testTimeout
	require.NoError(t, s.Start(context.Background(), nil))
	shutdown(t, s)
}

func TestStartHonoursContext(t *testing.T) {
	srv := newServer()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s := New(srv, testTimeout, zaptest.NewLogger(t))
	err := s.Start(ctx, nil)
	require.ErrorIs(t, err, context.Canceled)
	require.NoError(t, s.guard.Wait(context.Background()))
}

func TestShutdownWhileStarting(t *testing.T) {
	srv := newServer()
	counting := make(chan struct{})
	proceed := make(chan struct{})
	srv.DeviceGetCountFunc = func() (int, nvml.Return) {
		close(counting)
		<-proceed
		return len(srv.Devices), nvml.SUCCESS
	}
	set := eventSet(nil)
	srv.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return set, nvml.SUCCESS }
	s := New(srv, 5*time.Second, zaptest.NewLogger(t))
	s.xidWait = 10 * time.Millisecond
	done := make(chan error, 1)
	go func() { done <- s.Start(context.Background(), func(model.XIDEvent) {}) }()

	<-counting
	require.NoError(t, s.Shutdown(context.Background()), "nothing started yet")
	close(proceed)
	err := <-done
	assert.ErrorContains(t, err, "shut down while starting")
	assert.Len(t, srv.ShutdownCalls(), 1, "the abandoned start releases its Init")
	assert.Len(t, set.FreeCalls(), 1, "and stops its XID events")
	_, err = s.Collect(context.Background(), nil)
	assert.ErrorContains(t, err, "not started")
}

func TestShutdownNotStarted(t *testing.T) {
	srv := newServer()
	s := New(srv, testTimeout, zaptest.NewLogger(t))
	require.NoError(t, s.Shutdown(context.Background()))
	assert.Empty(t, srv.ShutdownCalls())
}

func TestShutdownReportsNVMLError(t *testing.T) {
	srv := newServer()
	srv.ShutdownFunc = func() nvml.Return { return nvml.ERROR_UNINITIALIZED }
	s := startSource(t, srv, nil)
	err := s.Shutdown(context.Background())
	require.ErrorIs(t, err, nvml.ERROR_UNINITIALIZED)
	assert.ErrorContains(t, err, "dcgmreceiver: nvml: shutdown")
}

func TestShutdownDoesNotWaitForAStuckCall(t *testing.T) {
	srv := newServer()
	release := make(chan struct{})
	mockDevice(srv, 4).GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) {
		<-release
		return 0, nvml.SUCCESS
	}
	s := startSource(t, srv, nil)
	_, err := s.Collect(context.Background(), []model.FieldID{model.FieldGPUTemp})
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = s.Shutdown(ctx)
	assert.Less(t, time.Since(start), 5*time.Second)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorContains(t, err, "still stuck")
	assert.Empty(t, srv.ShutdownCalls(), "nvmlShutdown would block behind the stuck call")

	close(release)
	require.NoError(t, s.guard.Wait(context.Background()))
}

func TestReturnError(t *testing.T) {
	assert.NoError(t, returnError(nvml.SUCCESS))
	err := returnError(nvml.ERROR_GPU_IS_LOST)
	assert.True(t, errors.Is(err, nvml.ERROR_GPU_IS_LOST))
}
