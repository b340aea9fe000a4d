package nvmlsrc // import "github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/source/nvmlsrc"

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
)

// target is what a reading reads from: a GPU or a MIG device.
type target struct {
	handle  nvml.Device
	nvlinks []int // NVLink link indexes; none for a MIG device
}

// Collect reads the given fields of every GPU, all GPUs at once. A GPU
// whose NVML call hangs comes back Unresponsive with no values; the others
// are not held up by it. Fields NVML does not have (profiling) are skipped.
func (s *Source) Collect(ctx context.Context, fields []model.FieldID) (model.Snapshot, error) {
	s.mu.Lock()
	started, devices, syms := s.started, s.devices, s.syms
	s.mu.Unlock()
	if !started {
		return model.Snapshot{}, errors.New("dcgmreceiver: nvml: collect: source not started")
	}

	want := s.wanted(fields)
	snap := model.Snapshot{Time: time.Now()}
	perDevice := make([][]model.GPUSample, len(devices))
	var wg sync.WaitGroup
	for i, d := range devices {
		wg.Go(func() { perDevice[i] = s.collectDevice(ctx, d, want, syms) })
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return model.Snapshot{}, fmt.Errorf("dcgmreceiver: nvml: collect: %w", err)
	}
	for _, samples := range perDevice {
		snap.GPUs = append(snap.GPUs, samples...)
	}
	return snap, nil
}

// wanted returns the set of requested fields NVML can provide.
func (s *Source) wanted(fields []model.FieldID) map[model.FieldID]bool {
	want := make(map[model.FieldID]bool, len(fields))
	profiling := false
	for _, id := range fields {
		f, ok := model.FieldByID(id)
		switch {
		case !ok:
			continue
		case f.Profiling:
			profiling = true
		default:
			want[id] = true
		}
	}
	if profiling {
		s.profilingOnce.Do(func() {
			s.logger.Info("profiling fields (DCGM_FI_PROF_*) need DCGM; the nvml source leaves them out")
		})
	}
	return want
}

// collectDevice reads one GPU and its MIG devices. If any call for the GPU
// hangs, every sample of the GPU is Unresponsive and carries no values.
func (s *Source) collectDevice(ctx context.Context, d *device, want map[model.FieldID]bool, syms *symbols) []model.GPUSample {
	c := &caller{ctx: ctx, guard: s.guard, key: d.key, timeout: s.callTimeout, logger: s.logger, syms: syms}

	samples := make([]model.GPUSample, 0, 1+len(d.migs))
	t := target{handle: d.handle, nvlinks: d.nvlinks}
	out := values{want: want}
	for _, r := range deviceReadings {
		if c.failed != nil {
			break
		}
		if out.wantsAny(r.fields) {
			r.read(c, t, &out)
		}
	}
	if d.xidRegistered {
		out.int(model.FieldXIDErrors, d.lastXID.Load())
	}
	samples = append(samples, model.GPUSample{GPU: d.gpu, Values: out.list})

	for _, mig := range d.migs {
		migOut := values{want: want}
		readMemory(c, target{handle: mig.handle}, &migOut)
		samples = append(samples, model.GPUSample{GPU: mig.gpu, Values: migOut.list})
	}

	if c.failed != nil {
		if ctx.Err() != nil {
			return samples // Collect fails as a whole
		}
		for i := range samples {
			samples[i].Values = nil
			samples[i].Unresponsive = true
		}
		if !d.unresponsive.Swap(true) {
			s.logger.Warn("GPU did not answer an NVML call in time; reported unresponsive until it does",
				zap.Int("gpu", d.gpu.Index), zap.String("uuid", d.gpu.UUID), zap.Error(c.failed))
		}
	} else if d.unresponsive.Swap(false) {
		s.logger.Info("GPU answers NVML calls again", zap.Int("gpu", d.gpu.Index), zap.String("uuid", d.gpu.UUID))
	}
	return samples
}

// values gathers the readings of one sample, keeping only wanted fields and
// never a value DCGM would take for a blank sentinel.
type values struct {
	want map[model.FieldID]bool
	list []model.Value
}

func (v *values) wantsAny(ids []model.FieldID) bool {
	for _, id := range ids {
		if v.want[id] {
			return true
		}
	}
	return false
}

func (v *values) int(id model.FieldID, x int64) {
	if v.want[id] && !model.IsBlankInt64(x) {
		v.list = append(v.list, model.Value{Field: id, Int: x})
	}
}

func (v *values) uint(id model.FieldID, x uint64) {
	if x < uint64(model.Int64Blank) {
		v.int(id, int64(x))
	}
}

func (v *values) float(id model.FieldID, x float64) {
	if v.want[id] && !model.IsBlankFloat64(x) && !math.IsInf(x, 0) {
		v.list = append(v.list, model.Value{Field: id, Float: x, IsFloat: true})
	}
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// reading is one NVML query (or a few related ones) and the catalogue
// fields it fills.
type reading struct {
	fields []model.FieldID
	read   func(c *caller, t target, out *values)
}

// simple builds a reading of one field from one call returning a number.
func simple[T uint32 | uint64 | int](id model.FieldID, what string, fn func(h nvml.Device) (T, nvml.Return)) reading {
	return reading{
		fields: []model.FieldID{id},
		read: func(c *caller, t target, out *values) {
			if v, ok := call(c, what, func() (T, nvml.Return) { return fn(t.handle) }); ok {
				out.int(id, int64(v))
			}
		},
	}
}

// violation reads the throttling time of one perf policy, in ns as DCGM
// reports it.
func violation(id model.FieldID, policy nvml.PerfPolicyType) reading {
	return reading{
		fields: []model.FieldID{id},
		read: func(c *caller, t target, out *values) {
			if v, ok := call(c, "GetViolationStatus", func() (nvml.ViolationTime, nvml.Return) {
				return t.handle.GetViolationStatus(policy)
			}); ok {
				out.uint(id, v.ViolationTime)
			}
		},
	}
}

// ecc reads one total ECC error count: corrected errors are DCGM's SBE,
// uncorrected its DBE.
func ecc(id model.FieldID, errType nvml.MemoryErrorType, counter nvml.EccCounterType) reading {
	return reading{
		fields: []model.FieldID{id},
		read: func(c *caller, t target, out *values) {
			if v, ok := call(c, "GetTotalEccErrors", func() (uint64, nvml.Return) {
				return t.handle.GetTotalEccErrors(errType, counter)
			}); ok {
				out.uint(id, v)
			}
		},
	}
}

// retiredPages counts the pages retired for one cause.
func retiredPages(id model.FieldID, cause nvml.PageRetirementCause) reading {
	return reading{
		fields: []model.FieldID{id},
		read: func(c *caller, t target, out *values) {
			if pages, ok := call(c, "GetRetiredPages", func() ([]uint64, nvml.Return) {
				return t.handle.GetRetiredPages(cause)
			}); ok {
				out.int(id, int64(len(pages)))
			}
		},
	}
}

// deviceReadings are the readings of a whole GPU, in catalogue order.
var deviceReadings = []reading{
	simple(model.FieldSMClock, "GetClockInfo", func(h nvml.Device) (uint32, nvml.Return) { return h.GetClockInfo(nvml.CLOCK_SM) }),
	simple(model.FieldMemClock, "GetClockInfo", func(h nvml.Device) (uint32, nvml.Return) { return h.GetClockInfo(nvml.CLOCK_MEM) }),
	{fields: []model.FieldID{model.FieldClocksEventReasons}, read: readClockReasons},
	{fields: []model.FieldID{model.FieldMemoryTemp}, read: readMemoryTemp},
	simple(model.FieldGPUTemp, "GetTemperature", func(h nvml.Device) (uint32, nvml.Return) { return h.GetTemperature(nvml.TEMPERATURE_GPU) }),
	{fields: []model.FieldID{model.FieldPowerUsage}, read: func(c *caller, t target, out *values) {
		if mw, ok := call(c, "GetPowerUsage", t.handle.GetPowerUsage); ok {
			out.float(model.FieldPowerUsage, float64(mw)/1000)
		}
	}},
	simple(model.FieldTotalEnergy, "GetTotalEnergyConsumption", nvml.Device.GetTotalEnergyConsumption),
	{fields: []model.FieldID{model.FieldPowerMgmtLimit}, read: func(c *caller, t target, out *values) {
		if mw, ok := call(c, "GetPowerManagementLimit", t.handle.GetPowerManagementLimit); ok {
			out.float(model.FieldPowerMgmtLimit, float64(mw)/1000)
		}
	}},
	simple(model.FieldPCIeReplayCounter, "GetPcieReplayCounter", nvml.Device.GetPcieReplayCounter),
	{fields: []model.FieldID{model.FieldGPUUtil, model.FieldMemCopyUtil}, read: func(c *caller, t target, out *values) {
		if u, ok := call(c, "GetUtilizationRates", t.handle.GetUtilizationRates); ok {
			out.int(model.FieldGPUUtil, int64(u.Gpu))
			out.int(model.FieldMemCopyUtil, int64(u.Memory))
		}
	}},
	simple(model.FieldEncUtil, "GetEncoderUtilization", func(h nvml.Device) (uint32, nvml.Return) {
		util, _, ret := h.GetEncoderUtilization()
		return util, ret
	}),
	simple(model.FieldDecUtil, "GetDecoderUtilization", func(h nvml.Device) (uint32, nvml.Return) {
		util, _, ret := h.GetDecoderUtilization()
		return util, ret
	}),
	violation(model.FieldPowerViolation, nvml.PERF_POLICY_POWER),
	violation(model.FieldThermalViolation, nvml.PERF_POLICY_THERMAL),
	violation(model.FieldSyncBoostViolation, nvml.PERF_POLICY_SYNC_BOOST),
	violation(model.FieldBoardLimitViolation, nvml.PERF_POLICY_BOARD_LIMIT),
	violation(model.FieldLowUtilViolation, nvml.PERF_POLICY_LOW_UTILIZATION),
	violation(model.FieldReliabilityViol, nvml.PERF_POLICY_RELIABILITY),
	violation(model.FieldAppClocksViolation, nvml.PERF_POLICY_TOTAL_APP_CLOCKS),
	violation(model.FieldBaseClocksViolation, nvml.PERF_POLICY_TOTAL_BASE_CLOCKS),
	{fields: fbFields, read: readMemory},
	ecc(model.FieldECCSBEVolTotal, nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.VOLATILE_ECC),
	ecc(model.FieldECCDBEVolTotal, nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC),
	ecc(model.FieldECCSBEAggTotal, nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.AGGREGATE_ECC),
	ecc(model.FieldECCDBEAggTotal, nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.AGGREGATE_ECC),
	retiredPages(model.FieldRetiredSBE, nvml.PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS),
	retiredPages(model.FieldRetiredDBE, nvml.PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR),
	{fields: []model.FieldID{model.FieldRetiredPending}, read: func(c *caller, t target, out *values) {
		if state, ok := call(c, "GetRetiredPagesPendingStatus", t.handle.GetRetiredPagesPendingStatus); ok {
			out.int(model.FieldRetiredPending, boolInt(state == nvml.FEATURE_ENABLED))
		}
	}},
	{fields: []model.FieldID{model.FieldUncorrectableRemap, model.FieldCorrectableRemap, model.FieldRowRemapFailure}, read: readRemappedRows},
	{fields: nvlinkFields, read: readNVLinkErrors},
}

var fbFields = []model.FieldID{model.FieldFBTotal, model.FieldFBFree, model.FieldFBUsed, model.FieldFBReserved}

var nvlinkFields = []model.FieldID{model.FieldNVLinkCRCFlitErrors, model.FieldNVLinkCRCDataErrors, model.FieldNVLinkReplayErrors, model.FieldNVLinkRecoveryErrs}

// readClockReasons reads the clock event (throttle) reasons bitmask: the
// newer call where the driver has it (535+), else the older one.
func readClockReasons(c *caller, t target, out *values) {
	mask, ok := call(c, "GetCurrentClocksEventReasons", t.handle.GetCurrentClocksEventReasons)
	if !ok {
		mask, ok = call(c, "GetCurrentClocksThrottleReasons", t.handle.GetCurrentClocksThrottleReasons) //nolint:staticcheck // the call drivers before 535 have
	}
	if ok {
		out.uint(model.FieldClocksEventReasons, mask)
	}
}

// readMemoryTemp reads the HBM temperature, which NVML only exposes as a
// field value; GPUs without an HBM sensor answer with an error and the
// field is left out.
func readMemoryTemp(c *caller, t target, out *values) {
	fv, ok := call(c, "GetFieldValues", func() (nvml.FieldValue, nvml.Return) {
		vals := []nvml.FieldValue{{FieldId: nvml.FI_DEV_MEMORY_TEMP}}
		ret := t.handle.GetFieldValues(vals)
		return vals[0], ret
	})
	if !ok {
		return
	}
	if v, ok := fieldValueInt(fv); ok {
		out.int(model.FieldMemoryTemp, v)
	}
}

// fieldValueInt decodes an integer NVML field value (the union is stored
// little-endian, as on every platform NVML runs on).
func fieldValueInt(fv nvml.FieldValue) (int64, bool) {
	if nvml.Return(fv.NvmlReturn) != nvml.SUCCESS {
		return 0, false
	}
	b := fv.Value[:]
	switch nvml.ValueType(fv.ValueType) {
	case nvml.VALUE_TYPE_DOUBLE:
		f := math.Float64frombits(binary.LittleEndian.Uint64(b))
		if math.IsNaN(f) || f >= math.MaxInt64 || f <= math.MinInt64 {
			return 0, false
		}
		return int64(f), true
	case nvml.VALUE_TYPE_UNSIGNED_INT:
		return int64(binary.LittleEndian.Uint32(b)), true
	case nvml.VALUE_TYPE_UNSIGNED_LONG, nvml.VALUE_TYPE_UNSIGNED_LONG_LONG:
		u := binary.LittleEndian.Uint64(b)
		if u > math.MaxInt64 {
			return 0, false
		}
		return int64(u), true
	case nvml.VALUE_TYPE_SIGNED_LONG_LONG:
		return int64(binary.LittleEndian.Uint64(b)), true
	case nvml.VALUE_TYPE_SIGNED_INT:
		return int64(int32(binary.LittleEndian.Uint32(b))), true
	case nvml.VALUE_TYPE_UNSIGNED_SHORT:
		return int64(binary.LittleEndian.Uint16(b)), true
	default:
		return 0, false
	}
}

// readMemory reads framebuffer memory in MiB, as DCGM reports it. The v2
// call splits out the memory the driver reserves (FB_RESERVED); with the
// v1 call "used" includes it and FB_RESERVED is left out.
func readMemory(c *caller, t target, out *values) {
	if !out.wantsAny(fbFields) {
		return
	}
	const mib = 1 << 20
	if m, ok := call(c, "GetMemoryInfo_v2", t.handle.GetMemoryInfo_v2); ok {
		out.uint(model.FieldFBTotal, m.Total/mib)
		out.uint(model.FieldFBFree, m.Free/mib)
		out.uint(model.FieldFBUsed, m.Used/mib)
		out.uint(model.FieldFBReserved, m.Reserved/mib)
		return
	}
	if m, ok := call(c, "GetMemoryInfo", t.handle.GetMemoryInfo); ok {
		out.uint(model.FieldFBTotal, m.Total/mib)
		out.uint(model.FieldFBFree, m.Free/mib)
		out.uint(model.FieldFBUsed, m.Used/mib)
	}
}

// readRemappedRows reads the HBM row remapping counts (A100 and later).
func readRemappedRows(c *caller, t target, out *values) {
	type remap struct {
		correctable, uncorrectable int
		failure                    bool
	}
	r, ok := call(c, "GetRemappedRows", func() (remap, nvml.Return) {
		corr, unc, _, failed, ret := t.handle.GetRemappedRows()
		return remap{corr, unc, failed}, ret
	})
	if !ok {
		return
	}
	out.int(model.FieldCorrectableRemap, int64(r.correctable))
	out.int(model.FieldUncorrectableRemap, int64(r.uncorrectable))
	out.int(model.FieldRowRemapFailure, boolInt(r.failure))
}

// readNVLinkErrors sums the NVLink error counters over the GPU's active
// links, as DCGM's *_COUNT_TOTAL fields do. A counter no active link
// reports is left out.
func readNVLinkErrors(c *caller, t target, out *values) {
	if len(t.nvlinks) == 0 {
		return
	}
	counters := [...]struct {
		id      model.FieldID
		counter nvml.NvLinkErrorCounter
	}{
		{model.FieldNVLinkCRCFlitErrors, nvml.NVLINK_ERROR_DL_CRC_FLIT},
		{model.FieldNVLinkCRCDataErrors, nvml.NVLINK_ERROR_DL_CRC_DATA},
		{model.FieldNVLinkReplayErrors, nvml.NVLINK_ERROR_DL_REPLAY},
		{model.FieldNVLinkRecoveryErrs, nvml.NVLINK_ERROR_DL_RECOVERY},
	}
	type totals struct {
		sum [len(counters)]uint64
		ok  [len(counters)]bool
	}
	// One guarded call for all links: tens of calls that go together.
	tot, ok := call(c, "GetNvLinkErrorCounter", func() (totals, nvml.Return) {
		var tot totals
		any := false
		for _, link := range t.nvlinks {
			state, ret := t.handle.GetNvLinkState(link)
			if ret != nvml.SUCCESS || state != nvml.FEATURE_ENABLED {
				continue
			}
			for i, ctr := range counters {
				if v, ret := t.handle.GetNvLinkErrorCounter(link, ctr.counter); ret == nvml.SUCCESS {
					tot.sum[i] += v
					tot.ok[i] = true
					any = true
				}
			}
		}
		if !any {
			return tot, nvml.ERROR_NOT_SUPPORTED
		}
		return tot, nvml.SUCCESS
	})
	if !ok {
		return
	}
	for i, ctr := range counters {
		if tot.ok[i] {
			out.uint(ctr.id, tot.sum[i])
		}
	}
}
