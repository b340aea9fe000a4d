package semconv

// DCGM health watches (the dcgm receiver's dcgm source): one log record when
// an incident appears and one when it clears, and a gauge per GPU and
// watched system every collection. The fault correlator reads the records
// as the text signal EventGPUHealthIncident (docs/fault-record.md).
const (
	// MetricGPUHealthStatus is the worst result DCGM's health watches report
	// for one GPU and one system: 0 pass, 1 warn, 2 fail.
	MetricGPUHealthStatus = "gpu.dcgm.health.status"

	// EventGPUHealthIncident names the log records of health incidents; the
	// correlator observes each appearing incident under this name (and
	// under name{k=v} for AttrGPUHealthSystem, AttrGPUHealthResult and
	// AttrGPUHealthErrorName), with the incident's text (system, result,
	// error and message) as the sample.
	EventGPUHealthIncident = "gpu.dcgm.health.incident"

	// AttrGPUHealthSystem is the watched system, one of HealthSystem*.
	AttrGPUHealthSystem = "gpu.dcgm.health.system"
	// AttrGPUHealthResult is HealthResultWarn or HealthResultFail for an
	// incident, HealthResultPass on the record of one that cleared.
	AttrGPUHealthResult = "gpu.dcgm.health.result"
	// AttrGPUHealthErrorCode is DCGM's error code (dcgmError_t, DCGM_FR_*).
	AttrGPUHealthErrorCode = "gpu.dcgm.health.error.code"
	// AttrGPUHealthErrorName is the code's name, e.g. DCGM_FR_VOLATILE_DBE_DETECTED.
	AttrGPUHealthErrorName = "gpu.dcgm.health.error.name"
	// AttrGPUHealthErrorMessage is DCGM's message of the incident.
	AttrGPUHealthErrorMessage = "gpu.dcgm.health.error.message"
	// AttrGPUHealthNVSwitch is the DCGM entity id of the NVSwitch an
	// incident is on (NVSwitch records carry no GPU).
	AttrGPUHealthNVSwitch = "gpu.dcgm.health.nvswitch.id"
)

// Values of AttrGPUHealthResult.
const (
	HealthResultPass = "pass"
	HealthResultWarn = "warn"
	HealthResultFail = "fail"
)

// Values of AttrGPUHealthSystem: DCGM's health watch systems
// (dcgmHealthSystems_t) the dcgm source sets.
const (
	HealthSystemPCIe             = "pcie"
	HealthSystemMemory           = "memory"
	HealthSystemInforom          = "inforom"
	HealthSystemThermal          = "thermal"
	HealthSystemPower            = "power"
	HealthSystemNVLink           = "nvlink"
	HealthSystemNVSwitchFatal    = "nvswitch_fatal"
	HealthSystemNVSwitchNonFatal = "nvswitch_nonfatal"
)
