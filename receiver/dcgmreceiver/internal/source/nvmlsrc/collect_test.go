package nvmlsrc

import (
	"context"
	"encoding/binary"
	"encoding/xml"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
)

func TestCollectAllFields(t *testing.T) {
	srv := newServer()
	s := startSource(t, srv, nil)
	defer shutdown(t, s)

	snap, err := s.Collect(context.Background(), allFields())
	require.NoError(t, err)
	assert.False(t, snap.Time.IsZero())
	require.Len(t, snap.GPUs, 8)
	for i, sample := range snap.GPUs {
		assert.Equal(t, i, sample.GPU.Index)
		assert.False(t, sample.Unresponsive)
		// Exactly the expected values: no profiling field, no driver
		// version (a string), no XID field (no XID sink).
		assert.Equal(t, expectedValues(i), byField(sample.Values), "GPU %d", i)
		assert.Len(t, sample.Values, len(expectedValues(i)), "GPU %d: a field reported twice", i)
	}
}

func TestCollectOnlyRequestedFields(t *testing.T) {
	srv := newServer()
	s := startSource(t, srv, nil)
	defer shutdown(t, s)

	snap, err := s.Collect(context.Background(), []model.FieldID{model.FieldGPUTemp, model.FieldFBUsed, model.FieldProfSMActive, 9999})
	require.NoError(t, err)
	for i, sample := range snap.GPUs {
		want := expectedValues(i)
		assert.Equal(t, map[model.FieldID]model.Value{
			model.FieldGPUTemp: want[model.FieldGPUTemp],
			model.FieldFBUsed:  want[model.FieldFBUsed],
		}, byField(sample.Values))
		// Readings nobody asked for are not made.
		assert.Empty(t, mockDevice(srv, i).GetPowerUsageCalls())
		assert.Empty(t, mockDevice(srv, i).GetTotalEccErrorsCalls())
	}
}

func TestCollectLeavesOutWhatNVMLDoesNotGive(t *testing.T) {
	srv := newServer()
	d := mockDevice(srv, 0)
	d.GetPowerUsageFunc = func() (uint32, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	d.GetFieldValuesFunc = func(vals []nvml.FieldValue) nvml.Return {
		vals[0].NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED) // no HBM sensor
		return nvml.SUCCESS
	}
	d.GetRetiredPagesFunc = func(nvml.PageRetirementCause) ([]uint64, nvml.Return) { return nil, nvml.ERROR_NOT_SUPPORTED }
	d.GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) { return 0, 0, false, false, nvml.ERROR_UNKNOWN }
	d.GetNvLinkStateFunc = func(int) (nvml.EnableState, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{}, nvml.ERROR_GPU_IS_LOST }
	d.GetTotalEccErrorsFunc = func(nvml.MemoryErrorType, nvml.EccCounterType) (uint64, nvml.Return) {
		return math.MaxUint64, nvml.SUCCESS // would read as a DCGM blank sentinel
	}
	s := startSource(t, srv, nil)
	defer shutdown(t, s)

	snap, err := s.Collect(context.Background(), allFields())
	require.NoError(t, err)
	got := byField(snap.GPUs[0].Values)
	for _, id := range []model.FieldID{
		model.FieldPowerUsage, model.FieldMemoryTemp,
		model.FieldRetiredSBE, model.FieldRetiredDBE,
		model.FieldCorrectableRemap, model.FieldUncorrectableRemap, model.FieldRowRemapFailure,
		model.FieldNVLinkCRCFlitErrors, model.FieldNVLinkCRCDataErrors, model.FieldNVLinkReplayErrors, model.FieldNVLinkRecoveryErrs,
		model.FieldGPUUtil, model.FieldMemCopyUtil,
		model.FieldECCSBEVolTotal, model.FieldECCDBEVolTotal, model.FieldECCSBEAggTotal, model.FieldECCDBEAggTotal,
	} {
		assert.NotContains(t, got, id, "field %d", id)
	}
	want := expectedValues(0)
	assert.Equal(t, want[model.FieldGPUTemp], got[model.FieldGPUTemp], "the rest of GPU 0 still reads")
	assert.Equal(t, want[model.FieldRetiredPending], got[model.FieldRetiredPending])
	assert.False(t, snap.GPUs[0].Unresponsive, "errors are not hangs")
	// Other GPUs are untouched.
	assert.Equal(t, expectedValues(1), byField(snap.GPUs[1].Values))
}

func TestCollectHungGPUIsUnresponsive(t *testing.T) {
	srv := newServer()
	release := make(chan struct{})
	hung := mockDevice(srv, 3)
	hung.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) {
		<-release
		return 33, nvml.SUCCESS
	}
	s := startSource(t, srv, nil)
	defer func() {
		close(release)
		shutdown(t, s)
	}()

	for range 2 {
		snap, err := s.Collect(context.Background(), allFields())
		require.NoError(t, err)
		require.Len(t, snap.GPUs, 8)
		for i, sample := range snap.GPUs {
			if i == 3 {
				assert.True(t, sample.Unresponsive)
				assert.Empty(t, sample.Values, "an unresponsive GPU reports no values")
				assert.Equal(t, hung.UUID, sample.GPU.UUID, "its identity is still there")
				continue
			}
			assert.False(t, sample.Unresponsive, "GPU %d", i)
			assert.Equal(t, expectedValues(i), byField(sample.Values), "GPU %d", i)
		}
	}
	// The second collection did not call into the stuck GPU again, and
	// made no call after the one that hung.
	assert.Len(t, hung.GetTemperatureCalls(), 1)
	assert.Empty(t, hung.GetPowerUsageCalls())
}

func TestCollectRecoversWhenTheCallReturns(t *testing.T) {
	srv := newServer()
	core, logs := observer.New(zapcore.InfoLevel)
	release := make(chan struct{})
	var calls atomic.Int32
	mockDevice(srv, 6).GetPowerUsageFunc = func() (uint32, nvml.Return) {
		if calls.Add(1) == 1 {
			<-release // the first call hangs
		}
		return 250000, nvml.SUCCESS
	}
	s := New(srv, testTimeout, zap.New(core))
	require.NoError(t, s.Start(context.Background(), nil))
	defer shutdown(t, s)

	for range 3 {
		snap, err := s.Collect(context.Background(), []model.FieldID{model.FieldPowerUsage})
		require.NoError(t, err)
		assert.True(t, snap.GPUs[6].Unresponsive)
	}
	assert.Equal(t, 1, logs.FilterMessageSnippet("reported unresponsive").Len(), "logged once, not at every collection")

	close(release)
	require.NoError(t, s.guard.Wait(context.Background()))
	snap, err := s.Collect(context.Background(), []model.FieldID{model.FieldPowerUsage})
	require.NoError(t, err)
	assert.False(t, snap.GPUs[6].Unresponsive)
	assert.Equal(t, []model.Value{{Field: model.FieldPowerUsage, Float: 250, IsFloat: true}}, snap.GPUs[6].Values)
	assert.Equal(t, 1, logs.FilterMessage("GPU answers NVML calls again").Len())
}

func TestCollectGPUHungAtStart(t *testing.T) {
	srv := newServer()
	release := make(chan struct{})
	mockDevice(srv, 1).GetNameFunc = func() (string, nvml.Return) {
		<-release
		return "late", nvml.SUCCESS
	}
	s := startSource(t, srv, nil)
	defer shutdown(t, s)

	snap, err := s.Collect(context.Background(), []model.FieldID{model.FieldGPUTemp})
	require.NoError(t, err)
	require.Len(t, snap.GPUs, 8, "a GPU that hangs at start is kept")
	assert.True(t, snap.GPUs[1].Unresponsive)
	assert.Equal(t, 1, snap.GPUs[1].GPU.Index)
	assert.Equal(t, mockDevice(srv, 1).UUID, snap.GPUs[1].GPU.UUID, "what was read before the hang is kept")
	close(release)
	require.NoError(t, s.guard.Wait(context.Background()))
}

func TestCollectFallsBackOnOlderDrivers(t *testing.T) {
	srv := newServer()
	missing := map[string]bool{
		"nvmlDeviceGetCurrentClocksEventReasons": true,
		"nvmlDeviceGetMemoryInfo_v2":             true,
		"nvmlDeviceGetRemappedRows":              true,
	}
	srv.LookupSymbolFunc = func(name string) error {
		if missing[name] {
			return errors.New("undefined symbol: " + name)
		}
		return nil
	}
	for i := range srv.Devices {
		d := mockDevice(srv, i)
		// Calling a function the driver lacks would abort the process: the
		// mock panics instead, so these must not be called at all.
		d.GetCurrentClocksEventReasonsFunc = nil
		d.GetMemoryInfo_v2Func = nil
		d.GetRemappedRowsFunc = nil
		d.GetCurrentClocksThrottleReasonsFunc = func() (uint64, nvml.Return) { return 0x4, nvml.SUCCESS }
		d.MemoryInfo = nvml.Memory{Total: 40960 * mib, Used: 1200 * mib, Free: 39760 * mib}
	}
	s := startSource(t, srv, nil)
	defer shutdown(t, s)

	snap, err := s.Collect(context.Background(), allFields())
	require.NoError(t, err)
	for _, sample := range snap.GPUs {
		got := byField(sample.Values)
		assert.Equal(t, int64(0x4), got[model.FieldClocksEventReasons].Int)
		assert.Equal(t, int64(40960), got[model.FieldFBTotal].Int)
		assert.Equal(t, int64(1200), got[model.FieldFBUsed].Int, "v1 used includes the reserved memory")
		assert.Equal(t, int64(39760), got[model.FieldFBFree].Int)
		assert.NotContains(t, got, model.FieldFBReserved, "only v2 gives reserved memory")
		assert.NotContains(t, got, model.FieldCorrectableRemap)
	}
}

func TestCollectMemoryV1WhenV2Fails(t *testing.T) {
	srv := newServer()
	d := mockDevice(srv, 0)
	d.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) {
		return nvml.Memory_v2{}, nvml.ERROR_ARGUMENT_VERSION_MISMATCH
	}
	d.MemoryInfo = nvml.Memory{Total: 100 * mib, Used: 60 * mib, Free: 40 * mib}
	s := startSource(t, srv, nil)
	defer shutdown(t, s)

	snap, err := s.Collect(context.Background(), []model.FieldID{model.FieldFBTotal, model.FieldFBUsed, model.FieldFBFree, model.FieldFBReserved})
	require.NoError(t, err)
	assert.Equal(t, []model.Value{
		{Field: model.FieldFBTotal, Int: 100},
		{Field: model.FieldFBFree, Int: 40},
		{Field: model.FieldFBUsed, Int: 60},
	}, snap.GPUs[0].Values)
}

func TestCollectHonoursContext(t *testing.T) {
	srv := newServer()
	s := startSource(t, srv, nil)
	defer shutdown(t, s)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.Collect(ctx, allFields())
	require.ErrorIs(t, err, context.Canceled)
	assert.ErrorContains(t, err, "dcgmreceiver: nvml: collect")
}

func TestCollectAfterShutdown(t *testing.T) {
	srv := newServer()
	s := startSource(t, srv, nil)
	shutdown(t, s)
	_, err := s.Collect(context.Background(), allFields())
	assert.ErrorContains(t, err, "not started")
}

func TestFieldValueInt(t *testing.T) {
	fv := func(vt nvml.ValueType, raw uint64) nvml.FieldValue {
		v := nvml.FieldValue{ValueType: uint32(vt)}
		binary.LittleEndian.PutUint64(v.Value[:], raw)
		return v
	}
	for _, tc := range []struct {
		name string
		in   nvml.FieldValue
		want int64
		ok   bool
	}{
		{"uint32", fv(nvml.VALUE_TYPE_UNSIGNED_INT, 44), 44, true},
		{"uint64", fv(nvml.VALUE_TYPE_UNSIGNED_LONG_LONG, 1<<40), 1 << 40, true},
		{"uint64 too large", fv(nvml.VALUE_TYPE_UNSIGNED_LONG, math.MaxUint64), 0, false},
		{"int64", fv(nvml.VALUE_TYPE_SIGNED_LONG_LONG, uint64(math.MaxUint64)), -1, true},
		{"int32", fv(nvml.VALUE_TYPE_SIGNED_INT, 0xFFFFFFFE), -2, true},
		{"uint16", fv(nvml.VALUE_TYPE_UNSIGNED_SHORT, 0x1_0007), 7, true},
		{"double", fv(nvml.VALUE_TYPE_DOUBLE, math.Float64bits(45.7)), 45, true},
		{"NaN", fv(nvml.VALUE_TYPE_DOUBLE, math.Float64bits(math.NaN())), 0, false},
		{"huge double", fv(nvml.VALUE_TYPE_DOUBLE, math.Float64bits(1e300)), 0, false},
		{"unknown type", fv(nvml.VALUE_TYPE_COUNT, 1), 0, false},
		{"failed", nvml.FieldValue{NvmlReturn: uint32(nvml.ERROR_NOT_SUPPORTED)}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := fieldValueInt(tc.in)
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestValuesDropSentinels(t *testing.T) {
	v := values{want: map[model.FieldID]bool{model.FieldGPUTemp: true, model.FieldPowerUsage: true}}
	v.int(model.FieldGPUTemp, model.Int64Blank)
	v.uint(model.FieldGPUTemp, math.MaxUint64)
	v.float(model.FieldPowerUsage, math.NaN())
	v.float(model.FieldPowerUsage, math.Inf(1))
	v.float(model.FieldPowerUsage, model.Float64Blank)
	v.int(model.FieldSMClock, 5) // not wanted
	assert.Empty(t, v.list)
	v.int(model.FieldGPUTemp, 0)
	v.float(model.FieldPowerUsage, 0.5)
	assert.Equal(t, []model.Value{{Field: model.FieldGPUTemp}, {Field: model.FieldPowerUsage, Float: 0.5, IsFloat: true}}, v.list)
}

// smiLog is the part of `nvidia-smi -q -x` output the fixture test reads.
type smiLog struct {
	DriverVersion string   `xml:"driver_version"`
	GPUs          []smiGPU `xml:"gpu"`
}

type smiFB struct {
	Total    string `xml:"total"`
	Reserved string `xml:"reserved"`
	Used     string `xml:"used"`
	Free     string `xml:"free"`
}

type smiECC struct {
	SRAMCorrectable   string `xml:"sram_correctable"`
	SRAMUncorrectable string `xml:"sram_uncorrectable"`
	DRAMCorrectable   string `xml:"dram_correctable"`
	DRAMUncorrectable string `xml:"dram_uncorrectable"`
}

type smiGPU struct {
	ProductName string `xml:"product_name"`
	MIGMode     string `xml:"mig_mode>current_mig"`
	MIGDevices  []struct {
		GPUInstanceID     int   `xml:"gpu_instance_id"`
		ComputeInstanceID int   `xml:"compute_instance_id"`
		FB                smiFB `xml:"fb_memory_usage"`
	} `xml:"mig_devices>mig_device"`
	UUID         string `xml:"uuid"`
	Minor        int    `xml:"minor_number"`
	BusID        string `xml:"pci>pci_bus_id"`
	Replays      string `xml:"pci>replay_counter"`
	ClockReasons struct {
		Reasons []struct {
			XMLName xml.Name
			State   string `xml:",chardata"`
		} `xml:",any"`
	} `xml:"clocks_event_reasons"`
	FB          smiFB  `xml:"fb_memory_usage"`
	GPUUtil     string `xml:"utilization>gpu_util"`
	MemUtil     string `xml:"utilization>memory_util"`
	EncUtil     string `xml:"utilization>encoder_util"`
	DecUtil     string `xml:"utilization>decoder_util"`
	ECCVolatile smiECC `xml:"ecc_errors>volatile"`
	ECCAgg      smiECC `xml:"ecc_errors>aggregate"`
	RetiredSBE  string `xml:"retired_pages>multiple_single_bit_retirement>retired_count"`
	RetiredDBE  string `xml:"retired_pages>double_bit_retirement>retired_count"`
	Pending     string `xml:"retired_pages>pending_retirement"`
	Remapped    string `xml:"remapped_rows"`
	GPUTemp     string `xml:"temperature>gpu_temp"`
	MemTemp     string `xml:"temperature>memory_temp"`
	PowerDraw   string `xml:"gpu_power_readings>power_draw"`
	PowerLimit  string `xml:"gpu_power_readings>current_power_limit"`
	SMClock     string `xml:"clocks>sm_clock"`
	MemClock    string `xml:"clocks>mem_clock"`
}

// smiNumber parses an nvidia-smi reading such as "67.03 W"; N/A gives
// NOT_SUPPORTED, as NVML answered nvidia-smi.
func smiNumber(t *testing.T, s, unit string) (float64, nvml.Return) {
	t.Helper()
	s = strings.TrimSpace(s)
	if s == "N/A" || s == "" {
		return 0, nvml.ERROR_NOT_SUPPORTED
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(s, unit)), 64)
	require.NoError(t, err, "reading %q", s)
	return f, nvml.SUCCESS
}

func smiMemory(t *testing.T, fb smiFB) nvml.Memory_v2 {
	mibOf := func(s string) uint64 {
		f, ret := smiNumber(t, s, "MiB")
		require.Equal(t, nvml.SUCCESS, ret)
		return uint64(f) * mib
	}
	return nvml.Memory_v2{Total: mibOf(fb.Total), Reserved: mibOf(fb.Reserved), Used: mibOf(fb.Used), Free: mibOf(fb.Free)}
}

// nvidia-smi's names of the clock event reason bits.
var smiReasonBits = map[string]uint64{
	"gpu_idle": 0x1, "applications_clocks_setting": 0x2, "sw_power_cap": 0x4, "hw_slowdown": 0x8,
	"sync_boost": 0x10, "sw_thermal_slowdown": 0x20, "hw_thermal_slowdown": 0x40,
	"hw_power_brake_slowdown": 0x80, "display_clocks_setting": 0x100,
}

// serverFromSMI builds a one-GPU mock that answers NVML as the GPU in an
// `nvidia-smi -q -x` capture did: N/A readings become ERROR_NOT_SUPPORTED,
// readings the capture does not have (energy, violations, NVLink) too.
func serverFromSMI(t *testing.T, path string) *server.Server {
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var log smiLog
	require.NoError(t, xml.Unmarshal(raw, &log))
	require.Len(t, log.GPUs, 1)
	g := log.GPUs[0]

	srv := dgxa100.New()
	srv.Devices = srv.Devices[:1]
	srv.DriverVersion = log.DriverVersion
	d := mockDevice(srv, 0)
	d.UUID, d.Minor, d.PciBusID = g.UUID, g.Minor, g.BusID
	if g.MIGMode == "Enabled" {
		d.MigMode = nvml.DEVICE_MIG_ENABLE
	}
	notSupported := func() (uint64, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	u32 := func(s, unit string) func() (uint32, nvml.Return) {
		f, ret := smiNumber(t, s, unit)
		return func() (uint32, nvml.Return) { return uint32(f), ret }
	}
	milli := func(s, unit string) func() (uint32, nvml.Return) {
		f, ret := smiNumber(t, s, unit)
		return func() (uint32, nvml.Return) { return uint32(math.Round(f * 1000)), ret }
	}

	d.GetNameFunc = func() (string, nvml.Return) { return g.ProductName, nvml.SUCCESS }
	d.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
		var p nvml.PciInfo
		for i, c := range []byte(g.BusID) {
			p.BusId[i] = int8(c)
		}
		return p, nvml.SUCCESS
	}
	sm, mem := u32(g.SMClock, "MHz"), u32(g.MemClock, "MHz")
	d.GetClockInfoFunc = func(ct nvml.ClockType) (uint32, nvml.Return) {
		if ct == nvml.CLOCK_SM {
			return sm()
		}
		return mem()
	}
	var mask uint64
	for _, r := range g.ClockReasons.Reasons {
		bit, ok := smiReasonBits[strings.TrimPrefix(r.XMLName.Local, "clocks_event_reason_")]
		require.True(t, ok, "unknown reason %s", r.XMLName.Local)
		if r.State == "Active" {
			mask |= bit
		}
	}
	d.GetCurrentClocksEventReasonsFunc = func() (uint64, nvml.Return) { return mask, nvml.SUCCESS }
	memTemp, memTempRet := smiNumber(t, g.MemTemp, "C")
	d.GetFieldValuesFunc = func(vals []nvml.FieldValue) nvml.Return {
		vals[0].NvmlReturn = uint32(memTempRet)
		vals[0].ValueType = uint32(nvml.VALUE_TYPE_UNSIGNED_INT)
		binary.LittleEndian.PutUint32(vals[0].Value[:], uint32(memTemp))
		return nvml.SUCCESS
	}
	gpuTemp := u32(g.GPUTemp, "C")
	d.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) { return gpuTemp() }
	d.GetPowerUsageFunc = milli(g.PowerDraw, "W")
	d.GetPowerManagementLimitFunc = milli(g.PowerLimit, "W")
	d.GetTotalEnergyConsumptionFunc = notSupported
	replays, replaysRet := smiNumber(t, g.Replays, "")
	d.GetPcieReplayCounterFunc = func() (int, nvml.Return) { return int(replays), replaysRet }
	gpuUtil, gpuUtilRet := smiNumber(t, g.GPUUtil, "%")
	memUtil, _ := smiNumber(t, g.MemUtil, "%")
	d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
		return nvml.Utilization{Gpu: uint32(gpuUtil), Memory: uint32(memUtil)}, gpuUtilRet
	}
	enc, dec := u32(g.EncUtil, "%"), u32(g.DecUtil, "%")
	d.GetEncoderUtilizationFunc = func() (uint32, uint32, nvml.Return) { v, ret := enc(); return v, 0, ret }
	d.GetDecoderUtilizationFunc = func() (uint32, uint32, nvml.Return) { v, ret := dec(); return v, 0, ret }
	d.GetViolationStatusFunc = func(nvml.PerfPolicyType) (nvml.ViolationTime, nvml.Return) {
		return nvml.ViolationTime{}, nvml.ERROR_NOT_SUPPORTED
	}
	fb := smiMemory(t, g.FB)
	d.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) { return fb, nvml.SUCCESS }
	eccTotal := func(e smiECC, corrected bool) (uint64, nvml.Return) {
		a, b := e.SRAMUncorrectable, e.DRAMUncorrectable
		if corrected {
			a, b = e.SRAMCorrectable, e.DRAMCorrectable
		}
		x, ret1 := smiNumber(t, a, "")
		y, ret2 := smiNumber(t, b, "")
		if ret1 != nvml.SUCCESS || ret2 != nvml.SUCCESS {
			return 0, nvml.ERROR_NOT_SUPPORTED
		}
		return uint64(x + y), nvml.SUCCESS
	}
	d.GetTotalEccErrorsFunc = func(et nvml.MemoryErrorType, ct nvml.EccCounterType) (uint64, nvml.Return) {
		e := g.ECCVolatile
		if ct == nvml.AGGREGATE_ECC {
			e = g.ECCAgg
		}
		return eccTotal(e, et == nvml.MEMORY_ERROR_TYPE_CORRECTED)
	}
	sbe, sbeRet := smiNumber(t, g.RetiredSBE, "")
	dbe, dbeRet := smiNumber(t, g.RetiredDBE, "")
	d.GetRetiredPagesFunc = func(cause nvml.PageRetirementCause) ([]uint64, nvml.Return) {
		if cause == nvml.PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR {
			return make([]uint64, int(dbe)), dbeRet
		}
		return make([]uint64, int(sbe)), sbeRet
	}
	pendingRet := nvml.SUCCESS
	if g.Pending == "N/A" {
		pendingRet = nvml.ERROR_NOT_SUPPORTED
	}
	d.GetRetiredPagesPendingStatusFunc = func() (nvml.EnableState, nvml.Return) {
		return boolState(g.Pending == "Yes"), pendingRet
	}
	require.Equal(t, "N/A", g.Remapped, "the fixture has no remapped rows")
	d.GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) { return 0, 0, false, false, nvml.ERROR_NOT_SUPPORTED }
	d.GetNvLinkStateFunc = func(int) (nvml.EnableState, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }

	// MIG devices. The capture does not name their profile: the name is
	// built as NVML names a MIG device (14 SMs and 19968 MiB of an A100
	// 80GB make the 1g.20gb profile).
	var migs []nvml.Device
	for _, m := range g.MIGDevices {
		migFB := smiMemory(t, m.FB)
		migs = append(migs, &mock.Device{
			GetGpuInstanceIdFunc:     func() (int, nvml.Return) { return m.GPUInstanceID, nvml.SUCCESS },
			GetComputeInstanceIdFunc: func() (int, nvml.Return) { return m.ComputeInstanceID, nvml.SUCCESS },
			GetNameFunc:              func() (string, nvml.Return) { return g.ProductName + " MIG 1g.20gb", nvml.SUCCESS },
			GetMemoryInfo_v2Func:     func() (nvml.Memory_v2, nvml.Return) { return migFB, nvml.SUCCESS },
		})
	}
	d.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return 7, nvml.SUCCESS }
	d.GetMigDeviceHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		if i < 0 || i >= len(migs) {
			return nil, nvml.ERROR_NOT_FOUND
		}
		return migs[i], nvml.SUCCESS
	}
	return srv
}

func boolState(b bool) nvml.EnableState {
	if b {
		return nvml.FEATURE_ENABLED
	}
	return nvml.FEATURE_DISABLED
}

// TestCollectNvidiaSMICapture replays a real A100 80GB in MIG mode (four
// 1g.20gb instances) and checks the snapshot says what nvidia-smi said.
func TestCollectNvidiaSMICapture(t *testing.T) {
	srv := serverFromSMI(t, filepath.Join("testdata", "telegraf_nvidia-smi-q-x_A100-SXM4-80GB.xml"))
	s := startSource(t, srv, nil)
	defer shutdown(t, s)

	snap, err := s.Collect(context.Background(), allFields())
	require.NoError(t, err)
	require.Len(t, snap.GPUs, 5, "the GPU and its four MIG devices")

	parent := model.GPU{
		Index:         0,
		UUID:          "GPU-513536b6-7d19-9063-b049-1e69664bb298",
		Model:         "NVIDIA A100-SXM4-80GB",
		PCIBusID:      "00000000:01:00.0",
		Device:        "nvidia1",
		DriverVersion: "535.54.03",
	}
	assert.Equal(t, parent, snap.GPUs[0].GPU)
	intv := func(id model.FieldID, v int64) model.Value { return model.Value{Field: id, Int: v} }
	// In MIG mode NVML has no utilization, and this A100 reports neither
	// retired pages nor remapped rows: those fields are absent.
	assert.Equal(t, map[model.FieldID]model.Value{
		model.FieldSMClock:            intv(model.FieldSMClock, 1275),
		model.FieldMemClock:           intv(model.FieldMemClock, 1593),
		model.FieldClocksEventReasons: intv(model.FieldClocksEventReasons, 0),
		model.FieldMemoryTemp:         intv(model.FieldMemoryTemp, 44),
		model.FieldGPUTemp:            intv(model.FieldGPUTemp, 27),
		model.FieldPowerUsage:         {Field: model.FieldPowerUsage, Float: 67.03, IsFloat: true},
		model.FieldPowerMgmtLimit:     {Field: model.FieldPowerMgmtLimit, Float: 500, IsFloat: true},
		model.FieldPCIeReplayCounter:  intv(model.FieldPCIeReplayCounter, 0),
		model.FieldFBTotal:            intv(model.FieldFBTotal, 81920),
		model.FieldFBFree:             intv(model.FieldFBFree, 80999),
		model.FieldFBUsed:             intv(model.FieldFBUsed, 50),
		model.FieldFBReserved:         intv(model.FieldFBReserved, 869),
		model.FieldECCSBEVolTotal:     intv(model.FieldECCSBEVolTotal, 0),
		model.FieldECCDBEVolTotal:     intv(model.FieldECCDBEVolTotal, 0),
		model.FieldECCSBEAggTotal:     intv(model.FieldECCSBEAggTotal, 0),
		model.FieldECCDBEAggTotal:     intv(model.FieldECCDBEAggTotal, 0),
	}, byField(snap.GPUs[0].Values))

	for i, sample := range snap.GPUs[1:] {
		want := parent
		want.MIG = &model.MIGInstance{GPUInstanceID: 3 + i, ComputeInstanceID: 0, Profile: "1g.20gb"}
		assert.Equal(t, want, sample.GPU)
		assert.Equal(t, []model.Value{
			intv(model.FieldFBTotal, 19968),
			intv(model.FieldFBFree, 19955),
			intv(model.FieldFBUsed, 12),
			intv(model.FieldFBReserved, 0),
		}, sample.Values, "MIG device %d: framebuffer only", i)
	}
}

// BenchmarkCollect measures one collection of every field on 8 mock GPUs:
// the cost of the source itself (guard goroutines, conversions), not of
// NVML.
func BenchmarkCollect(b *testing.B) {
	srv := newServer()
	s := New(srv, testTimeout, zap.NewNop())
	require.NoError(b, s.Start(context.Background(), nil))
	defer func() { require.NoError(b, s.Shutdown(context.Background())) }()
	fields := allFields()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Collect(context.Background(), fields); err != nil {
			b.Fatal(err)
		}
	}
}
