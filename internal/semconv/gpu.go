package semconv

// GPU metric names and their attributes under the dcgm receiver's
// `naming: otel` (its internal/model catalogue maps DCGM fields onto them).
// The nodestate processor and the correlator's rules read them.
const (
	MetricGPUClockFrequency      = "gpu.clock.frequency"
	MetricHWTemperature          = "hw.temperature"
	MetricHWPower                = "hw.power"
	MetricGPUPowerLimit          = "gpu.power.limit"
	MetricHWEnergy               = "hw.energy"
	MetricGPUPCIeReplays         = "gpu.pcie.replays"
	MetricHWGPUUtilization       = "hw.gpu.utilization"
	MetricHWGPUMemoryUtilization = "hw.gpu.memory.utilization"
	MetricGPUXIDLast             = "gpu.xid.last"
	MetricGPUThrottleDuration    = "gpu.clock.throttle.duration"
	MetricHWGPUMemoryLimit       = "hw.gpu.memory.limit"
	MetricHWGPUMemoryUsage       = "hw.gpu.memory.usage"
	MetricGPUFramebuffer         = "gpu.framebuffer"
	MetricGPUECCErrors           = "gpu.ecc.errors"
	MetricGPURetiredPages        = "gpu.memory.retired_pages"
	MetricGPURetiredPagesPending = "gpu.memory.retired_pages.pending"
	MetricGPURemappedRows        = "gpu.memory.remapped_rows"
	MetricGPURowRemapFailure     = "gpu.memory.row_remap_failure"
	MetricGPUNVLinkErrors        = "gpu.nvlink.errors"
	MetricGPUNVLinkBandwidth     = "gpu.nvlink.bandwidth_counter"
	MetricGPUVGPULicense         = "gpu.vgpu.license_status"
	MetricGPUProfActive          = "gpu.prof.active"
	MetricGPUProfSMOccupancy     = "gpu.prof.sm.occupancy"
	MetricGPUProfPCIeIO          = "gpu.prof.pcie.io"
	MetricGPUProfNVLinkIO        = "gpu.prof.nvlink.io"
	MetricGPUClockThrottle       = "gpu.clock.throttle" // one 0/1 series per reason
	MetricGPUXIDErrors           = "gpu.xid.errors"     // count per GPU and code
	// MetricGPUUnresponsive is 1 while a call for the GPU is stuck. The
	// dcgm receiver also writes it as a bool attribute of its hung-GPU log
	// records (and EventGPUHang names those records).
	MetricGPUUnresponsive = "gpu.unresponsive"

	AttrGPUClockType        = "gpu.clock.type"        // sm | memory
	AttrHWSensorLocation    = "hw.sensor_location"    // gpu | memory
	AttrHWGPUTask           = "hw.gpu.task"           // general | encoder | decoder
	AttrGPUThrottleReason   = "gpu.throttle.reason"   // power | thermal | ...
	AttrGPUFramebufferState = "gpu.framebuffer.state" // free | reserved
	AttrGPUECCType          = "gpu.ecc.type"          // sbe_volatile | dbe_volatile | sbe_aggregate | dbe_aggregate
	AttrGPURetirementCause  = "gpu.memory.retirement.cause"
	AttrGPURemapType        = "gpu.memory.remap.type" // correctable | uncorrectable
	AttrGPUProfUnit         = "gpu.prof.unit"         // gr_engine | sm | tensor | dram | fp64 | fp32 | fp16

	// Values the nodestate processor selects.
	ProfUnitSM        = "sm"
	SensorLocationGPU = "gpu"
)

// Attribute values the dcgm receiver writes and the nodestate processor
// selects, and the instance the dcgm_exporter naming sets.
const (
	// AttrServiceInstanceID is OpenTelemetry's service.instance.id: under
	// naming dcgm_exporter the dcgm receiver sets it to the host name, and
	// remote write turns it into the instance label dashboards expect.
	AttrServiceInstanceID = "service.instance.id"

	// Values of gpu.ecc.type on gpu.ecc.errors, written by the dcgm
	// receiver's catalogue; the nodestate processor keeps one counter each.
	ECCTypeSBEVolatile  = "sbe_volatile"
	ECCTypeDBEVolatile  = "dbe_volatile"
	ECCTypeSBEAggregate = "sbe_aggregate"
	ECCTypeDBEAggregate = "dbe_aggregate"

	// Values of error.type on gpu.nvlink.errors, written by the dcgm
	// receiver's catalogue; the nodestate processor keeps one counter each.
	NVLinkErrorCRCFlit  = "crc_flit"
	NVLinkErrorCRCData  = "crc_data"
	NVLinkErrorReplay   = "replay"
	NVLinkErrorRecovery = "recovery"
)
