package model

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

//go:generate go run ./gendcgmfields

// FieldID is a DCGM field id (dcgm_fields.h). NVML and dcgm-exporter
// readings are mapped to the same ids, so the catalogue below is the one
// list of what the receiver knows.
type FieldID uint16

// The fields the receiver collects. Ids are DCGM's.
const (
	FieldDriverVersion FieldID = 1

	FieldSMClock             FieldID = 100
	FieldMemClock            FieldID = 101
	FieldClocksEventReasons  FieldID = 112 // DCGM_FI_DEV_CLOCK_THROTTLE_REASONS before DCGM 3.2
	FieldMemoryTemp          FieldID = 140
	FieldGPUTemp             FieldID = 150
	FieldPowerUsage          FieldID = 155
	FieldTotalEnergy         FieldID = 156
	FieldPowerMgmtLimit      FieldID = 160
	FieldPCIeReplayCounter   FieldID = 202
	FieldGPUUtil             FieldID = 203
	FieldMemCopyUtil         FieldID = 204
	FieldEncUtil             FieldID = 206
	FieldDecUtil             FieldID = 207
	FieldXIDErrors           FieldID = 230
	FieldPowerViolation      FieldID = 240
	FieldThermalViolation    FieldID = 241
	FieldSyncBoostViolation  FieldID = 242
	FieldBoardLimitViolation FieldID = 243
	FieldLowUtilViolation    FieldID = 244
	FieldReliabilityViol     FieldID = 245
	FieldAppClocksViolation  FieldID = 246
	FieldBaseClocksViolation FieldID = 247
	FieldFBTotal             FieldID = 250
	FieldFBFree              FieldID = 251
	FieldFBUsed              FieldID = 252
	FieldFBReserved          FieldID = 253
	FieldECCSBEVolTotal      FieldID = 310
	FieldECCDBEVolTotal      FieldID = 311
	FieldECCSBEAggTotal      FieldID = 312
	FieldECCDBEAggTotal      FieldID = 313
	FieldRetiredSBE          FieldID = 390
	FieldRetiredDBE          FieldID = 391
	FieldRetiredPending      FieldID = 392
	FieldUncorrectableRemap  FieldID = 393
	FieldCorrectableRemap    FieldID = 394
	FieldRowRemapFailure     FieldID = 395
	FieldNVLinkCRCFlitErrors FieldID = 409
	FieldNVLinkCRCDataErrors FieldID = 419
	FieldNVLinkReplayErrors  FieldID = 429
	FieldNVLinkRecoveryErrs  FieldID = 439
	FieldNVLinkBandwidthTot  FieldID = 449
	FieldVGPULicenseStatus   FieldID = 526

	FieldProfGREngineActive FieldID = 1001
	FieldProfSMActive       FieldID = 1002
	FieldProfSMOccupancy    FieldID = 1003
	FieldProfTensorActive   FieldID = 1004
	FieldProfDRAMActive     FieldID = 1005
	FieldProfFP64Active     FieldID = 1006
	FieldProfFP32Active     FieldID = 1007
	FieldProfFP16Active     FieldID = 1008
	FieldProfPCIeTxBytes    FieldID = 1009
	FieldProfPCIeRxBytes    FieldID = 1010
	FieldProfNVLinkTxBytes  FieldID = 1011
	FieldProfNVLinkRxBytes  FieldID = 1012
)

// Kind says how a field's value behaves over time.
type Kind uint8

const (
	// Gauge: a reading at a moment (temperature, utilization, a per-second rate).
	Gauge Kind = iota
	// Counter: a cumulative count since boot or driver load.
	Counter
	// Label: a string that identifies, not a measurement (driver version).
	Label
)

// Field describes one field: its DCGM identity, and the OpenTelemetry
// metric it becomes under `naming: otel` (docs/semconv.md).
type Field struct {
	ID   FieldID
	Name string // DCGM name, e.g. DCGM_FI_DEV_GPU_TEMP: the metric name under `naming: dcgm_exporter`
	Kind Kind
	// Profiling fields (DCGM_FI_PROF_*) come from the profiling module: their
	// own, slower interval, one consumer at a time, not on every GPU.
	Profiling bool
	// Help is dcgm-exporter's help text.
	Help string

	// OTel is the metric name under `naming: otel`; Unit its UCUM unit;
	// Scale converts the DCGM value to that unit (e.g. MiB to By).
	OTel  string
	Unit  string
	Scale float64
	// AttrKey/AttrValue tell apart fields that share one OTel metric, e.g.
	// hw.gpu.utilization with hw.gpu.task = encoder.
	AttrKey, AttrValue string
}

// Catalogue lists every field the receiver knows, in a stable order.
var Catalogue = []Field{
	{ID: FieldDriverVersion, Name: "DCGM_FI_DRIVER_VERSION", Kind: Label, Help: "Driver version."},

	{ID: FieldSMClock, Name: "DCGM_FI_DEV_SM_CLOCK", Help: "SM clock frequency (in MHz).", OTel: semconv.MetricGPUClockFrequency, Unit: "Hz", Scale: 1e6, AttrKey: semconv.AttrGPUClockType, AttrValue: "sm"},
	{ID: FieldMemClock, Name: "DCGM_FI_DEV_MEM_CLOCK", Help: "Memory clock frequency (in MHz).", OTel: semconv.MetricGPUClockFrequency, Unit: "Hz", Scale: 1e6, AttrKey: semconv.AttrGPUClockType, AttrValue: "memory"},
	{ID: FieldClocksEventReasons, Name: "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", Help: "Current clock event reasons (bitmask).", OTel: semconv.MetricGPUClockThrottle, Unit: "1", Scale: 1},
	{ID: FieldMemoryTemp, Name: "DCGM_FI_DEV_MEMORY_TEMP", Help: "Memory temperature (in C).", OTel: semconv.MetricHWTemperature, Unit: "Cel", Scale: 1, AttrKey: semconv.AttrHWSensorLocation, AttrValue: "memory"},
	{ID: FieldGPUTemp, Name: "DCGM_FI_DEV_GPU_TEMP", Help: "GPU temperature (in C).", OTel: semconv.MetricHWTemperature, Unit: "Cel", Scale: 1, AttrKey: semconv.AttrHWSensorLocation, AttrValue: semconv.SensorLocationGPU},
	{ID: FieldPowerUsage, Name: "DCGM_FI_DEV_POWER_USAGE", Help: "Power draw (in W).", OTel: semconv.MetricHWPower, Unit: "W", Scale: 1},
	{ID: FieldTotalEnergy, Name: "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", Kind: Counter, Help: "Total energy consumption since boot (in mJ).", OTel: semconv.MetricHWEnergy, Unit: "J", Scale: 1e-3},
	{ID: FieldPowerMgmtLimit, Name: "DCGM_FI_DEV_POWER_MGMT_LIMIT", Help: "Current power limit (in W).", OTel: semconv.MetricGPUPowerLimit, Unit: "W", Scale: 1},
	{ID: FieldPCIeReplayCounter, Name: "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", Kind: Counter, Help: "Total number of PCIe retries.", OTel: semconv.MetricGPUPCIeReplays, Unit: "{replay}", Scale: 1},
	{ID: FieldGPUUtil, Name: "DCGM_FI_DEV_GPU_UTIL", Help: "GPU utilization (in %).", OTel: semconv.MetricHWGPUUtilization, Unit: "1", Scale: 0.01, AttrKey: semconv.AttrHWGPUTask, AttrValue: "general"},
	{ID: FieldMemCopyUtil, Name: "DCGM_FI_DEV_MEM_COPY_UTIL", Help: "Memory utilization (in %).", OTel: semconv.MetricHWGPUMemoryUtilization, Unit: "1", Scale: 0.01},
	{ID: FieldEncUtil, Name: "DCGM_FI_DEV_ENC_UTIL", Help: "Encoder utilization (in %).", OTel: semconv.MetricHWGPUUtilization, Unit: "1", Scale: 0.01, AttrKey: semconv.AttrHWGPUTask, AttrValue: "encoder"},
	{ID: FieldDecUtil, Name: "DCGM_FI_DEV_DEC_UTIL", Help: "Decoder utilization (in %).", OTel: semconv.MetricHWGPUUtilization, Unit: "1", Scale: 0.01, AttrKey: semconv.AttrHWGPUTask, AttrValue: "decoder"},
	{ID: FieldXIDErrors, Name: "DCGM_FI_DEV_XID_ERRORS", Help: "Value of the last XID error encountered.", OTel: semconv.MetricGPUXIDLast, Unit: "{xid}", Scale: 1},

	{ID: FieldPowerViolation, Name: "DCGM_FI_DEV_POWER_VIOLATION", Kind: Counter, Help: "Throttling duration due to power constraints (in ns).", OTel: semconv.MetricGPUThrottleDuration, Unit: "s", Scale: 1e-9, AttrKey: semconv.AttrGPUThrottleReason, AttrValue: "power"},
	{ID: FieldThermalViolation, Name: "DCGM_FI_DEV_THERMAL_VIOLATION", Kind: Counter, Help: "Throttling duration due to thermal constraints (in ns).", OTel: semconv.MetricGPUThrottleDuration, Unit: "s", Scale: 1e-9, AttrKey: semconv.AttrGPUThrottleReason, AttrValue: "thermal"},
	{ID: FieldSyncBoostViolation, Name: "DCGM_FI_DEV_SYNC_BOOST_VIOLATION", Kind: Counter, Help: "Throttling duration due to sync-boost constraints (in ns).", OTel: semconv.MetricGPUThrottleDuration, Unit: "s", Scale: 1e-9, AttrKey: semconv.AttrGPUThrottleReason, AttrValue: "sync_boost"},
	{ID: FieldBoardLimitViolation, Name: "DCGM_FI_DEV_BOARD_LIMIT_VIOLATION", Kind: Counter, Help: "Throttling duration due to board limit constraints (in ns).", OTel: semconv.MetricGPUThrottleDuration, Unit: "s", Scale: 1e-9, AttrKey: semconv.AttrGPUThrottleReason, AttrValue: "board_limit"},
	{ID: FieldLowUtilViolation, Name: "DCGM_FI_DEV_LOW_UTIL_VIOLATION", Kind: Counter, Help: "Throttling duration due to low utilization (in ns).", OTel: semconv.MetricGPUThrottleDuration, Unit: "s", Scale: 1e-9, AttrKey: semconv.AttrGPUThrottleReason, AttrValue: "low_util"},
	{ID: FieldReliabilityViol, Name: "DCGM_FI_DEV_RELIABILITY_VIOLATION", Kind: Counter, Help: "Throttling duration due to reliability constraints (in ns).", OTel: semconv.MetricGPUThrottleDuration, Unit: "s", Scale: 1e-9, AttrKey: semconv.AttrGPUThrottleReason, AttrValue: "reliability"},
	{ID: FieldAppClocksViolation, Name: "DCGM_FI_DEV_TOTAL_APP_CLOCKS_VIOLATION", Kind: Counter, Help: "Throttling duration due to application clocks (in ns).", OTel: semconv.MetricGPUThrottleDuration, Unit: "s", Scale: 1e-9, AttrKey: semconv.AttrGPUThrottleReason, AttrValue: "app_clocks"},
	{ID: FieldBaseClocksViolation, Name: "DCGM_FI_DEV_TOTAL_BASE_CLOCKS_VIOLATION", Kind: Counter, Help: "Throttling duration due to base clocks (in ns).", OTel: semconv.MetricGPUThrottleDuration, Unit: "s", Scale: 1e-9, AttrKey: semconv.AttrGPUThrottleReason, AttrValue: "base_clocks"},

	{ID: FieldFBTotal, Name: "DCGM_FI_DEV_FB_TOTAL", Help: "Framebuffer memory total (in MiB).", OTel: semconv.MetricHWGPUMemoryLimit, Unit: "By", Scale: 1 << 20},
	{ID: FieldFBFree, Name: "DCGM_FI_DEV_FB_FREE", Help: "Framebuffer memory free (in MiB).", OTel: semconv.MetricGPUFramebuffer, Unit: "By", Scale: 1 << 20, AttrKey: semconv.AttrGPUFramebufferState, AttrValue: "free"},
	{ID: FieldFBUsed, Name: "DCGM_FI_DEV_FB_USED", Help: "Framebuffer memory used (in MiB).", OTel: semconv.MetricHWGPUMemoryUsage, Unit: "By", Scale: 1 << 20},
	{ID: FieldFBReserved, Name: "DCGM_FI_DEV_FB_RESERVED", Help: "Framebuffer memory reserved (in MiB).", OTel: semconv.MetricGPUFramebuffer, Unit: "By", Scale: 1 << 20, AttrKey: semconv.AttrGPUFramebufferState, AttrValue: "reserved"},

	{ID: FieldECCSBEVolTotal, Name: "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", Kind: Counter, Help: "Total number of single-bit volatile ECC errors.", OTel: semconv.MetricGPUECCErrors, Unit: "{error}", Scale: 1, AttrKey: semconv.AttrGPUECCType, AttrValue: semconv.ECCTypeSBEVolatile},
	{ID: FieldECCDBEVolTotal, Name: "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", Kind: Counter, Help: "Total number of double-bit volatile ECC errors.", OTel: semconv.MetricGPUECCErrors, Unit: "{error}", Scale: 1, AttrKey: semconv.AttrGPUECCType, AttrValue: semconv.ECCTypeDBEVolatile},
	{ID: FieldECCSBEAggTotal, Name: "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", Kind: Counter, Help: "Total number of single-bit persistent ECC errors.", OTel: semconv.MetricGPUECCErrors, Unit: "{error}", Scale: 1, AttrKey: semconv.AttrGPUECCType, AttrValue: semconv.ECCTypeSBEAggregate},
	{ID: FieldECCDBEAggTotal, Name: "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", Kind: Counter, Help: "Total number of double-bit persistent ECC errors.", OTel: semconv.MetricGPUECCErrors, Unit: "{error}", Scale: 1, AttrKey: semconv.AttrGPUECCType, AttrValue: semconv.ECCTypeDBEAggregate},
	{ID: FieldRetiredSBE, Name: "DCGM_FI_DEV_RETIRED_SBE", Kind: Counter, Help: "Total number of retired pages due to single-bit errors.", OTel: semconv.MetricGPURetiredPages, Unit: "{page}", Scale: 1, AttrKey: semconv.AttrGPURetirementCause, AttrValue: "sbe"},
	{ID: FieldRetiredDBE, Name: "DCGM_FI_DEV_RETIRED_DBE", Kind: Counter, Help: "Total number of retired pages due to double-bit errors.", OTel: semconv.MetricGPURetiredPages, Unit: "{page}", Scale: 1, AttrKey: semconv.AttrGPURetirementCause, AttrValue: "dbe"},
	{ID: FieldRetiredPending, Name: "DCGM_FI_DEV_RETIRED_PENDING", Help: "Total number of pages pending retirement.", OTel: semconv.MetricGPURetiredPagesPending, Unit: "{page}", Scale: 1},
	{ID: FieldUncorrectableRemap, Name: "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", Kind: Counter, Help: "Number of remapped rows for uncorrectable errors", OTel: semconv.MetricGPURemappedRows, Unit: "{row}", Scale: 1, AttrKey: semconv.AttrGPURemapType, AttrValue: "uncorrectable"},
	{ID: FieldCorrectableRemap, Name: "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", Kind: Counter, Help: "Number of remapped rows for correctable errors", OTel: semconv.MetricGPURemappedRows, Unit: "{row}", Scale: 1, AttrKey: semconv.AttrGPURemapType, AttrValue: "correctable"},
	{ID: FieldRowRemapFailure, Name: "DCGM_FI_DEV_ROW_REMAP_FAILURE", Help: "Whether remapping of rows has failed", OTel: semconv.MetricGPURowRemapFailure, Unit: "", Scale: 1},
	{ID: FieldNVLinkCRCFlitErrors, Name: "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", Kind: Counter, Help: "Total number of NVLink flow-control CRC errors.", OTel: semconv.MetricGPUNVLinkErrors, Unit: "{error}", Scale: 1, AttrKey: semconv.AttrErrorType, AttrValue: semconv.NVLinkErrorCRCFlit},
	{ID: FieldNVLinkCRCDataErrors, Name: "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", Kind: Counter, Help: "Total number of NVLink data CRC errors.", OTel: semconv.MetricGPUNVLinkErrors, Unit: "{error}", Scale: 1, AttrKey: semconv.AttrErrorType, AttrValue: semconv.NVLinkErrorCRCData},
	{ID: FieldNVLinkReplayErrors, Name: "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", Kind: Counter, Help: "Total number of NVLink retries.", OTel: semconv.MetricGPUNVLinkErrors, Unit: "{error}", Scale: 1, AttrKey: semconv.AttrErrorType, AttrValue: semconv.NVLinkErrorReplay},
	{ID: FieldNVLinkRecoveryErrs, Name: "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", Kind: Counter, Help: "Total number of NVLink recovery errors.", OTel: semconv.MetricGPUNVLinkErrors, Unit: "{error}", Scale: 1, AttrKey: semconv.AttrErrorType, AttrValue: semconv.NVLinkErrorRecovery},
	{ID: FieldNVLinkBandwidthTot, Name: "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", Kind: Counter, Help: "Total number of NVLink bandwidth counters for all lanes.", OTel: semconv.MetricGPUNVLinkBandwidth, Unit: "{count}", Scale: 1},
	{ID: FieldVGPULicenseStatus, Name: "DCGM_FI_DEV_VGPU_LICENSE_STATUS", Help: "vGPU License status", OTel: semconv.MetricGPUVGPULicense, Unit: "", Scale: 1},

	{ID: FieldProfGREngineActive, Name: "DCGM_FI_PROF_GR_ENGINE_ACTIVE", Profiling: true, Help: "Ratio of time the graphics engine is active.", OTel: semconv.MetricGPUProfActive, Unit: "1", Scale: 1, AttrKey: semconv.AttrGPUProfUnit, AttrValue: "gr_engine"},
	{ID: FieldProfSMActive, Name: "DCGM_FI_PROF_SM_ACTIVE", Profiling: true, Help: "The ratio of cycles an SM has at least 1 warp assigned.", OTel: semconv.MetricGPUProfActive, Unit: "1", Scale: 1, AttrKey: semconv.AttrGPUProfUnit, AttrValue: semconv.ProfUnitSM},
	{ID: FieldProfSMOccupancy, Name: "DCGM_FI_PROF_SM_OCCUPANCY", Profiling: true, Help: "The ratio of number of warps resident on an SM.", OTel: semconv.MetricGPUProfSMOccupancy, Unit: "1", Scale: 1},
	{ID: FieldProfTensorActive, Name: "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", Profiling: true, Help: "Ratio of cycles the tensor (HMMA) pipe is active.", OTel: semconv.MetricGPUProfActive, Unit: "1", Scale: 1, AttrKey: semconv.AttrGPUProfUnit, AttrValue: "tensor"},
	{ID: FieldProfDRAMActive, Name: "DCGM_FI_PROF_DRAM_ACTIVE", Profiling: true, Help: "Ratio of cycles the device memory interface is active sending or receiving data.", OTel: semconv.MetricGPUProfActive, Unit: "1", Scale: 1, AttrKey: semconv.AttrGPUProfUnit, AttrValue: "dram"},
	{ID: FieldProfFP64Active, Name: "DCGM_FI_PROF_PIPE_FP64_ACTIVE", Profiling: true, Help: "Ratio of cycles the fp64 pipes are active.", OTel: semconv.MetricGPUProfActive, Unit: "1", Scale: 1, AttrKey: semconv.AttrGPUProfUnit, AttrValue: "fp64"},
	{ID: FieldProfFP32Active, Name: "DCGM_FI_PROF_PIPE_FP32_ACTIVE", Profiling: true, Help: "Ratio of cycles the fp32 pipes are active.", OTel: semconv.MetricGPUProfActive, Unit: "1", Scale: 1, AttrKey: semconv.AttrGPUProfUnit, AttrValue: "fp32"},
	{ID: FieldProfFP16Active, Name: "DCGM_FI_PROF_PIPE_FP16_ACTIVE", Profiling: true, Help: "Ratio of cycles the fp16 pipes are active.", OTel: semconv.MetricGPUProfActive, Unit: "1", Scale: 1, AttrKey: semconv.AttrGPUProfUnit, AttrValue: "fp16"},
	{ID: FieldProfPCIeTxBytes, Name: "DCGM_FI_PROF_PCIE_TX_BYTES", Profiling: true, Help: "The rate of data transmitted over the PCIe bus - including both protocol headers and data payloads - in bytes per second.", OTel: semconv.MetricGPUProfPCIeIO, Unit: "By/s", Scale: 1, AttrKey: semconv.AttrNetworkIODirection, AttrValue: "transmit"},
	{ID: FieldProfPCIeRxBytes, Name: "DCGM_FI_PROF_PCIE_RX_BYTES", Profiling: true, Help: "The rate of data received over the PCIe bus - including both protocol headers and data payloads - in bytes per second.", OTel: semconv.MetricGPUProfPCIeIO, Unit: "By/s", Scale: 1, AttrKey: semconv.AttrNetworkIODirection, AttrValue: "receive"},
	{ID: FieldProfNVLinkTxBytes, Name: "DCGM_FI_PROF_NVLINK_TX_BYTES", Profiling: true, Help: "The rate of data transmitted over NVLink, not including protocol headers, in bytes per second.", OTel: semconv.MetricGPUProfNVLinkIO, Unit: "By/s", Scale: 1, AttrKey: semconv.AttrNetworkIODirection, AttrValue: "transmit"},
	{ID: FieldProfNVLinkRxBytes, Name: "DCGM_FI_PROF_NVLINK_RX_BYTES", Profiling: true, Help: "The rate of data received over NVLink, not including protocol headers, in bytes per second.", OTel: semconv.MetricGPUProfNVLinkIO, Unit: "By/s", Scale: 1, AttrKey: semconv.AttrNetworkIODirection, AttrValue: "receive"},
}

// Alternative names sources use for a catalogued field: the names DCGM
// had before (a page or a counters CSV may still use them; under
// dcgm_exporter naming a CSV's name is the series' name).
var aliases = map[string]FieldID{
	"DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": FieldClocksEventReasons,
}

var (
	byID   = map[FieldID]*Field{}
	byName = map[string]*Field{}
)

func init() {
	for i := range Catalogue {
		f := &Catalogue[i]
		byID[f.ID] = f
		byName[f.Name] = f
	}
	for name, id := range aliases {
		byName[name] = byID[id]
	}
}

// FieldByID returns the catalogue entry of a DCGM field id.
func FieldByID(id FieldID) (*Field, bool) {
	f, ok := byID[id]
	return f, ok
}

// FieldByName returns the catalogue entry of a DCGM field name
// (DCGM_FI_DEV_GPU_TEMP), as dcgm-exporter names its metrics.
func FieldByName(name string) (*Field, bool) {
	f, ok := byName[name]
	return f, ok
}

// ThrottleReasons are the bits of DCGM_FI_DEV_CLOCKS_EVENT_REASONS
// (nvmlClocksEventReason*), each reported as its own 0/1 series.
var ThrottleReasons = []struct {
	Bit  uint64
	Name string
}{
	{0x1, "gpu_idle"},
	{0x2, "applications_clocks_setting"},
	{0x4, "sw_power_cap"},
	{0x8, "hw_slowdown"},
	{0x10, "sync_boost"},
	{0x20, "sw_thermal_slowdown"},
	{0x40, "hw_thermal_slowdown"},
	{0x80, "hw_power_brake_slowdown"},
	{0x100, "display_clock_setting"},
}

// FieldIDByName returns the id of any DCGM field name go-dcgm knows
// (dcgm_fields.h), catalogued or not, so that a counters CSV can name any
// field: fan speed, BAR1, NVSwitch, per-link NVLink counters. It also reads
// DCGM_FI_<id> (NumericFieldName), the name of a field newer than go-dcgm's
// table that a counters CSV listed by its number.
func FieldIDByName(name string) (FieldID, bool) {
	if f, ok := byName[name]; ok {
		return f.ID, true
	}
	if id, ok := dcgmFieldIDs[name]; ok {
		return id, true
	}
	if digits, ok := strings.CutPrefix(name, numericNamePrefix); ok {
		return ParseFieldID(digits)
	}
	return 0, false
}

const numericNamePrefix = "DCGM_FI_"

// ParseFieldID reads a DCGM field id written as a decimal number (1 to
// 65535; 0 is DCGM_FI_UNKNOWN), without sign, spaces or leading zeros, so
// that each id has one spelling.
func ParseFieldID(s string) (FieldID, bool) {
	if s == "" || len(s) > 5 || s[0] == '0' {
		return 0, false
	}
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	if n > math.MaxUint16 {
		return 0, false
	}
	return FieldID(n), true
}

// FieldNameOf is the name of a field id: the catalogue's name, else go-dcgm's
// (the first in byte order where DCGM kept an old name beside a new one),
// else NumericFieldName(id) for a field newer than the table.
func FieldNameOf(id FieldID) string {
	if f, ok := byID[id]; ok {
		return f.Name
	}
	if name, ok := namesByID[id]; ok {
		return name
	}
	return NumericFieldName(id)
}

// NumericFieldName is DCGM_FI_<id>: the metric name, under naming
// dcgm_exporter, of a field a counters CSV lists by a number go-dcgm's table
// does not know (a valid Prometheus name that names no field of the table).
func NumericFieldName(id FieldID) string {
	return numericNamePrefix + strconv.Itoa(int(id))
}

// namesByID inverts go-dcgm's table.
var namesByID = func() map[FieldID]string {
	m := make(map[FieldID]string, len(dcgmFieldIDs))
	for name, id := range dcgmFieldIDs {
		if prev, ok := m[id]; !ok || name < prev {
			m[id] = name
		}
	}
	return m
}()

// DCGMFieldNames is every field name of go-dcgm's table, sorted.
func DCGMFieldNames() []string {
	names := make([]string, 0, len(dcgmFieldIDs))
	for name := range dcgmFieldIDs {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// IsProfilingID reports whether id is one of DCGM's profiling fields
// (DCGM_FI_PROF_*, ids 1001-1099), which have their own interval.
func IsProfilingID(id FieldID) bool { return id > 1000 && id < 1100 }

// OTelNameOf is the metric name, under `naming: otel`, of a field outside
// the catalogue: DCGM_FI_DEV_FAN_SPEED becomes gpu.dcgm.dev_fan_speed. The
// catalogue's fields have semantic-convention names; these keep DCGM's, in
// the gpu.dcgm namespace, so they never collide with a convention's name.
func OTelNameOf(name string) string {
	return "gpu.dcgm." + strings.ToLower(strings.TrimPrefix(name, "DCGM_FI_"))
}
