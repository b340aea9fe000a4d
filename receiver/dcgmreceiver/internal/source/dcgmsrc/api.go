package dcgmsrc

import (
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
)

// api is every DCGM call this package makes. The one production
// implementation (dcgm_api.go) calls go-dcgm; tests use a fake. Only
// Connection holds an api, and it lets no call but Init through until Init
// has succeeded: go-dcgm kills the process (undefined symbol) when any
// other call is made without a successful Init.
type api interface {
	// Init loads libdcgm.so.4 and connects (standalone) or starts the
	// engine in-process (embedded). cleanup disconnects and unloads it.
	Init(mode Mode, address string, isUnixSocket bool) (cleanup func(), err error)
	// SupportedDevices lists the DCGM GPU ids of the GPUs DCGM supports.
	SupportedDevices() ([]uint, error)
	DeviceInfo(gpu uint) (deviceInfo, error)
	// SupportedMetricGroups lists the profiling metric groups a GPU
	// supports (dcgmProfGetSupportedMetricGroups).
	SupportedMetricGroups(gpu uint) ([]metricGroup, error)

	CreateFieldGroup(name string, fields []model.FieldID) (handle, error)
	DestroyFieldGroup(fieldGroup handle) error
	CreateGPUGroup(name string, gpus []uint) (handle, error)
	DestroyGPUGroup(gpuGroup handle) error
	// Watch asks DCGM to sample the field group on the GPU group every
	// updateEvery, keeping samples for keepAge or keepSamples (0: no limit).
	Watch(fieldGroup, gpuGroup handle, updateEvery, keepAge time.Duration, keepSamples int) error
	Unwatch(fieldGroup, gpuGroup handle) error

	// LatestValues reads the latest cached value of each field of one GPU.
	LatestValues(gpu uint, fields []model.FieldID) ([]fieldValue, error)
	// ValuesSince reads every sample stored since the given time and
	// returns the time to pass next (dcgmGetValuesSince_v2).
	ValuesSince(gpuGroup, fieldGroup handle, since time.Time) ([]fieldValue, time.Time, error)

	// MIGHierarchy lists the MIG GPU instances of every GPU in MIG mode
	// (dcgmGetGpuInstanceHierarchy), with their compute instances and
	// profile names; none when no GPU has MIG on.
	MIGHierarchy() ([]gpuInstance, error)
	// CreateGPUInstanceGroup makes a group of MIG GPU instances (DCGM_FE_GPU_I
	// entities, by entity id): watched like a GPU group.
	CreateGPUInstanceGroup(name string, gpuInstances []uint) (handle, error)
	// GPUInstanceValues reads the latest cached value of each field of each
	// GPU instance (dcgmEntitiesGetLatestValues); fieldValue.GPU holds the
	// GPU instance's entity id.
	GPUInstanceValues(gpuInstances []uint, fields []model.FieldID) ([]fieldValue, error)

	// NVSwitches lists the DCGM entity ids of the node's NVSwitches
	// (dcgmGetEntityGroupEntities of DCGM_FE_SWITCH); none on a node
	// without.
	NVSwitches() ([]uint, error)
	// CreateHealthGroup makes a group of GPUs and NVSwitches for the
	// health watches; it is destroyed with DestroyGPUGroup.
	CreateHealthGroup(name string, gpus, nvSwitches []uint) (handle, error)
	// HealthSet sets the health watches of the group to systems
	// (dcgmHealthSet).
	HealthSet(group handle, systems healthSystems) error
	// HealthCheck returns every incident the group's watches report
	// (dcgmHealthCheck).
	HealthCheck(group handle) ([]healthIncident, error)
}

// healthSystems is a set of DCGM health watch systems (the bits of
// dcgmHealthSystems_t).
type healthSystems uint32

// The systems the source watches (dcgm_structs.h).
const (
	healthPCIe             healthSystems = 0x1
	healthNVLink           healthSystems = 0x2
	healthMemory           healthSystems = 0x10
	healthInforom          healthSystems = 0x40
	healthThermal          healthSystems = 0x80
	healthPower            healthSystems = 0x100
	healthNVSwitchNonFatal healthSystems = 0x400
	healthNVSwitchFatal    healthSystems = 0x800
)

// DCGM's health results (DCGM_HEALTH_RESULT_*).
const (
	healthResultPass = 0
	healthResultWarn = 10
	healthResultFail = 20
)

// healthIncident is one incident of a health check (dcgmIncidentInfo_t).
type healthIncident struct {
	System   healthSystems // one system
	Result   int           // healthResultWarn or healthResultFail
	Code     int           // dcgmError_t: DCGM_FR_*
	Message  string
	OnSwitch bool // the entity is an NVSwitch (DCGM_FE_SWITCH), else a GPU
	Entity   uint // the GPU id or NVSwitch entity id
}

// gpuInstance is one MIG GPU instance as DCGM's hierarchy lists it.
type gpuInstance struct {
	Entity uint // DCGM's DCGM_FE_GPU_I entity id: what groups and reads name
	GPU    uint // the parent's DCGM GPU id
	// InstanceID is NVML's GPU instance id: dcgm-exporter's GPU_I_ID.
	InstanceID uint
	// ComputeInstanceIDs are NVML's ids of its compute instances.
	ComputeInstanceIDs []uint
	// Profile is the instance's DCGM_FI_DEV_NAME, e.g. "1g.10gb"
	// (dcgm-exporter's GPU_I_PROFILE); empty when DCGM did not say.
	Profile string
}

// handle is an opaque DCGM field-group or GPU-group handle.
type handle uintptr

// deviceInfo is what the receiver needs of dcgmDeviceAttributes_t.
type deviceInfo struct {
	UUID          string
	Model         string
	PCIBusID      string
	DriverVersion string
}

// metricGroup is one profiling metric group a GPU supports.
type metricGroup struct {
	Major, Minor uint
	Fields       []model.FieldID
}

// DCGM field types (dcgm_fields.h).
const (
	fieldTypeDouble byte = 'd'
	fieldTypeInt64  byte = 'i'
)

// fieldValue is one sample of one field of one GPU (or, read with
// GPUInstanceValues, of one MIG GPU instance).
type fieldValue struct {
	GPU    uint // the DCGM GPU id, or the GPU instance's entity id
	Field  model.FieldID
	Type   byte // fieldTypeDouble, fieldTypeInt64, or another DCGM type the receiver ignores
	Status int  // a DCGM_ST_* code; anything but 0 means there is no value
	Int    int64
	Float  float64
	TS     int64 // microseconds since the epoch
}

// toModel converts a sample to the model, refusing DCGM's blank and
// not-supported sentinels, failed statuses and non-numeric types: those are
// "no value", never a reading.
func (v fieldValue) toModel() (model.Value, bool) {
	if v.Status != 0 {
		return model.Value{}, false
	}
	out := model.Value{Field: v.Field}
	if v.TS > 0 {
		out.Time = time.UnixMicro(v.TS)
	}
	switch v.Type {
	case fieldTypeInt64:
		if model.IsBlankInt64(v.Int) {
			return model.Value{}, false
		}
		out.Int = v.Int
	case fieldTypeDouble:
		if model.IsBlankFloat64(v.Float) {
			return model.Value{}, false
		}
		out.Float, out.IsFloat = v.Float, true
	default:
		return model.Value{}, false
	}
	return out, true
}
