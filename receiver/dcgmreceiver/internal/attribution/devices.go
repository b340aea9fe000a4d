package attribution // import "github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/attribution"

import "github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"

// wholeGPU is the gpuInstance of a reference to a whole GPU (or to every
// MIG instance of it).
const wholeGPU = -1

type refKind uint8

const (
	byUUID   refKind = iota + 1 // GPU-… or MIG-…
	byIndex                     // the DCGM / NVML index
	byDevice                    // the device node name, nvidia<N>
)

// deviceRef is one way a source names a GPU.
type deviceRef struct {
	kind        refKind
	name        string // UUID or device name
	index       int    // for byIndex
	gpuInstance int    // MIG GPU instance id, or wholeGPU
}

func uuidRef(uuid string, gi int) deviceRef {
	return deviceRef{kind: byUUID, name: uuid, gpuInstance: gi}
}
func indexRef(index, gi int) deviceRef {
	return deviceRef{kind: byIndex, index: index, gpuInstance: gi}
}
func deviceNameRef(dev string, gi int) deviceRef {
	return deviceRef{kind: byDevice, name: dev, gpuInstance: gi}
}

// matches reports whether ref names gpu. A whole-GPU reference also names
// each MIG instance of that GPU.
func (r deviceRef) matches(gpu model.GPU) bool {
	if r.gpuInstance != wholeGPU && (gpu.MIG == nil || gpu.MIG.GPUInstanceID != r.gpuInstance) {
		return false
	}
	switch r.kind {
	case byUUID:
		return gpu.UUID != "" && gpu.UUID == r.name
	case byIndex:
		return gpu.Index == r.index
	case byDevice:
		return gpu.Device != "" && gpu.Device == r.name
	}
	return false
}

// deviceMap maps the ways of naming a GPU to what a source knows about it.
// The nil map is empty.
type deviceMap[T any] map[deviceRef]T

// add records value for ref. Each GPU of gpus that ref names is stored
// under all of its own names (so a GPU a source named by index is found by
// UUID too); a ref naming no GPU of the list is stored as it is. A name
// already taken keeps its first value: attributes hold one owner. add
// reports whether value was stored anywhere.
func (m deviceMap[T]) add(ref deviceRef, value T, gpus []model.GPU) bool {
	stored, matched := false, false
	for _, gpu := range gpus {
		if !ref.matches(gpu) {
			continue
		}
		matched = true
		for _, name := range namesOf(gpu) {
			stored = m.putFirst(name, value) || stored
		}
	}
	if !matched {
		stored = m.putFirst(ref, value)
	}
	return stored
}

func (m deviceMap[T]) putFirst(ref deviceRef, value T) bool {
	if _, taken := m[ref]; taken {
		return false
	}
	m[ref] = value
	return true
}

// lookup finds gpu by its UUID, then device name, then index; a MIG
// instance falls back to whatever was said about its whole GPU.
func (m deviceMap[T]) lookup(gpu model.GPU) (T, bool) {
	var zero T
	if len(m) == 0 {
		return zero, false
	}
	gi := wholeGPU
	if gpu.MIG != nil {
		gi = gpu.MIG.GPUInstanceID
	}
	for {
		if gpu.UUID != "" {
			if v, ok := m[uuidRef(gpu.UUID, gi)]; ok {
				return v, true
			}
		}
		if gpu.Device != "" {
			if v, ok := m[deviceNameRef(gpu.Device, gi)]; ok {
				return v, true
			}
		}
		if v, ok := m[indexRef(gpu.Index, gi)]; ok {
			return v, true
		}
		if gi == wholeGPU {
			return zero, false
		}
		gi = wholeGPU
	}
}

// namesOf lists every name gpu can be looked up by.
func namesOf(gpu model.GPU) []deviceRef {
	gi := wholeGPU
	if gpu.MIG != nil {
		gi = gpu.MIG.GPUInstanceID
	}
	names := make([]deviceRef, 0, 3)
	if gpu.UUID != "" {
		names = append(names, uuidRef(gpu.UUID, gi))
	}
	if gpu.Device != "" {
		names = append(names, deviceNameRef(gpu.Device, gi))
	}
	return append(names, indexRef(gpu.Index, gi))
}
