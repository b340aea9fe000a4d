package dcgmsrc

// A DCGM without hardware, for the tests of this package and of the dcgm
// receiver (which drives the real Source through it). Not used in
// production: nothing but tests calls NewFakeConnections.

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
)

// fakeHealthHandleBase keeps FakeHealth's group handles apart from those of
// an api it is part of.
const fakeHealthHandleBase handle = 1 << 20

// FakeIncident is a health incident FakeHealth reports, on a GPU (by its
// DCGM id) or an NVSwitch.
type FakeIncident struct {
	GPU      uint
	NVSwitch *uint  // set: the incident is on this NVSwitch entity
	System   string // semconv.HealthSystem*
	Result   model.HealthResult
	Code     int // DCGM_FR_*
	Message  string
}

// FakeHealth is DCGM's health watches as the source uses them: groups of
// GPUs and NVSwitches, HealthSet, and HealthCheck reporting the incidents
// the test set on the entities of the group, for the systems set on it.
// As DCGM does, the first check after HealthSet reports nothing.
type FakeHealth struct {
	mu             sync.Mutex
	switches       []uint
	refuseNVSwitch bool
	next           handle
	groups         map[handle]*fakeHealthGroup
	incidents      []FakeIncident
	sets, checks   int
}

type fakeHealthGroup struct {
	gpus, switches []uint
	systems        healthSystems
	set, checked   bool
}

// NewFakeHealth returns health watches over the NVSwitches given (none: a
// node without); refuseNVSwitch makes HealthSet refuse the NVSwitch
// systems.
func NewFakeHealth(switches []uint, refuseNVSwitch bool) *FakeHealth {
	return &FakeHealth{switches: slices.Clone(switches), refuseNVSwitch: refuseNVSwitch,
		next: fakeHealthHandleBase, groups: map[handle]*fakeHealthGroup{}}
}

// SetIncidents replaces what the watches report from the next check on.
func (f *FakeHealth) SetIncidents(in ...FakeIncident) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.incidents = slices.Clone(in)
}

// Groups returns how many health groups exist.
func (f *FakeHealth) Groups() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.groups)
}

// Calls returns how many HealthSet and HealthCheck calls succeeded.
func (f *FakeHealth) Calls() (sets, checks int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sets, f.checks
}

// NVSwitches implements api.
func (f *FakeHealth) NVSwitches() ([]uint, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.switches), nil
}

// CreateHealthGroup implements api.
func (f *FakeHealth) CreateHealthGroup(_ string, gpus, switches []uint) (handle, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range switches {
		if !slices.Contains(f.switches, s) {
			return 0, fmt.Errorf("no NVSwitch %d", s)
		}
	}
	f.next++
	f.groups[f.next] = &fakeHealthGroup{gpus: slices.Clone(gpus), switches: slices.Clone(switches)}
	return f.next, nil
}

// destroy removes a health group; reports whether g was one.
func (f *FakeHealth) destroy(g handle) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.groups[g]
	delete(f.groups, g)
	return ok
}

// HealthSet implements api.
func (f *FakeHealth) HealthSet(g handle, systems healthSystems) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	grp, ok := f.groups[g]
	if !ok {
		return errors.New("error setting health watches: Invalid group")
	}
	if f.refuseNVSwitch && systems&nvSwitchSystems != 0 {
		return errors.New("error setting health watches: This request is serviced by a module of DCGM that is not currently loaded")
	}
	grp.systems, grp.set, grp.checked = systems, true, false
	f.sets++
	return nil
}

// HealthCheck implements api.
func (f *FakeHealth) HealthCheck(g handle) ([]healthIncident, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	grp, ok := f.groups[g]
	if !ok || !grp.set {
		return nil, errors.New("error checking health: invalid group")
	}
	f.checks++
	if !grp.checked {
		grp.checked = true
		return nil, nil
	}
	var out []healthIncident
	for _, in := range f.incidents {
		bit := healthSystems(0)
		for _, n := range healthSystemNames {
			if n.name == in.System {
				bit = n.bit
			}
		}
		if grp.systems&bit == 0 {
			continue
		}
		hi := healthIncident{System: bit, Code: in.Code, Message: in.Message, Result: healthResultWarn}
		if in.Result == model.HealthFail {
			hi.Result = healthResultFail
		}
		if in.NVSwitch != nil {
			if !slices.Contains(grp.switches, *in.NVSwitch) {
				continue
			}
			hi.OnSwitch, hi.Entity = true, *in.NVSwitch
		} else {
			if !slices.Contains(grp.gpus, in.GPU) {
				continue
			}
			hi.Entity = in.GPU
		}
		out = append(out, hi)
	}
	return out, nil
}

// FakeGPU is one GPU of FakeDCGM.
type FakeGPU struct {
	UUID, Model, PCIBusID, DriverVersion string
}

// FakeDCGM is the smallest DCGM the Source runs against: GPUs with an
// identity and no field values (every field reads as not watched), no
// XIDs, no MIG, no profiling, and FakeHealth's health watches. Like go-dcgm
// it refuses every call before Init.
type FakeDCGM struct {
	*FakeHealth

	mu          sync.Mutex
	gpus        []FakeGPU
	initialized bool
	next        handle
}

// NewFakeDCGM returns a fake with the given GPUs (DCGM ids 0, 1, ...).
func NewFakeDCGM(health *FakeHealth, gpus ...FakeGPU) *FakeDCGM {
	return &FakeDCGM{FakeHealth: health, gpus: slices.Clone(gpus)}
}

// NewFakeConnections returns a registry whose connections use f, with the
// given clock.
func NewFakeConnections(f *FakeDCGM, now func() time.Time) *Connections {
	return newConnections(func() api { return f }, now)
}

var errFakeNotInit = errors.New("fake DCGM: called before Init (go-dcgm would kill the process)")

func (f *FakeDCGM) ready() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.initialized {
		return errFakeNotInit
	}
	return nil
}

func (f *FakeDCGM) handle() handle {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next++
	return f.next
}

// Init implements api.
func (f *FakeDCGM) Init(Mode, string, bool) (func(), error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.initialized = true
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.initialized = false
	}, nil
}

// SupportedDevices implements api.
func (f *FakeDCGM) SupportedDevices() ([]uint, error) {
	if err := f.ready(); err != nil {
		return nil, err
	}
	ids := make([]uint, len(f.gpus))
	for i := range ids {
		ids[i] = uint(i)
	}
	return ids, nil
}

// DeviceInfo implements api.
func (f *FakeDCGM) DeviceInfo(gpu uint) (deviceInfo, error) {
	if err := f.ready(); err != nil {
		return deviceInfo{}, err
	}
	if int(gpu) >= len(f.gpus) {
		return deviceInfo{}, fmt.Errorf("no GPU %d", gpu)
	}
	g := f.gpus[gpu]
	return deviceInfo(g), nil
}

// SupportedMetricGroups implements api: no profiling.
func (f *FakeDCGM) SupportedMetricGroups(uint) ([]metricGroup, error) { return nil, f.ready() }

// CreateFieldGroup implements api.
func (f *FakeDCGM) CreateFieldGroup(string, []model.FieldID) (handle, error) {
	return f.handle(), f.ready()
}

// DestroyFieldGroup implements api.
func (f *FakeDCGM) DestroyFieldGroup(handle) error { return f.ready() }

// CreateGPUGroup implements api.
func (f *FakeDCGM) CreateGPUGroup(string, []uint) (handle, error) { return f.handle(), f.ready() }

// DestroyGPUGroup implements api.
func (f *FakeDCGM) DestroyGPUGroup(g handle) error {
	f.destroy(g)
	return f.ready()
}

// Watch implements api.
func (f *FakeDCGM) Watch(handle, handle, time.Duration, time.Duration, int) error {
	return f.ready()
}

// Unwatch implements api.
func (f *FakeDCGM) Unwatch(handle, handle) error { return f.ready() }

// LatestValues implements api: nothing is measured.
func (f *FakeDCGM) LatestValues(gpu uint, fields []model.FieldID) ([]fieldValue, error) {
	if err := f.ready(); err != nil {
		return nil, err
	}
	out := make([]fieldValue, len(fields))
	for i, id := range fields {
		out[i] = fieldValue{GPU: gpu, Field: id, Status: -2} // DCGM_ST_NOT_SUPPORTED
	}
	return out, nil
}

// ValuesSince implements api: no XIDs.
func (f *FakeDCGM) ValuesSince(_, _ handle, since time.Time) ([]fieldValue, time.Time, error) {
	return nil, since, f.ready()
}

// MIGHierarchy implements api: no MIG.
func (f *FakeDCGM) MIGHierarchy() ([]gpuInstance, error) { return nil, f.ready() }

// CreateGPUInstanceGroup implements api.
func (f *FakeDCGM) CreateGPUInstanceGroup(string, []uint) (handle, error) {
	return f.handle(), f.ready()
}

// GPUInstanceValues implements api.
func (f *FakeDCGM) GPUInstanceValues([]uint, []model.FieldID) ([]fieldValue, error) {
	return nil, f.ready()
}

var _ api = (*FakeDCGM)(nil)
