// Package model is the one internal form every GPU source (DCGM, NVML,
// dcgm-exporter scrapes, the kernel log) produces and the receiver turns
// into metrics and log records. Whatever the source, the output is the same.
package model // import "github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"

import (
	"math"
	"time"
)

// GPU identifies one device (or one MIG instance of it) on the node.
type GPU struct {
	// Index is the DCGM GPU id / NVML index: dcgm-exporter's "gpu" label.
	Index int
	// UUID as NVML reports it, e.g. GPU-c2f76b33-7953-256e-8f33-1343419b1a1c.
	UUID string
	// Model name, e.g. "NVIDIA H100 80GB HBM3" (dcgm-exporter's modelName).
	Model string
	// PCIBusID in NVML's long form, e.g. 00000000:31:00.0.
	PCIBusID string
	// Device node name, e.g. nvidia0.
	Device string
	// DriverVersion, e.g. 580.105.08.
	DriverVersion string
	// MIG is set for a MIG instance; nil for a whole GPU.
	MIG *MIGInstance
}

// MIGInstance names a MIG slice of a GPU.
type MIGInstance struct {
	GPUInstanceID     int
	ComputeInstanceID int
	Profile           string // e.g. 1g.10gb
}

// Value is one field's reading. Exactly one of Int and Float is meaningful,
// as IsFloat says. Sources drop DCGM's blank / not-supported sentinels
// before they get here (IsBlankInt64, IsBlankFloat64).
type Value struct {
	Field   FieldID
	Int     int64
	Float   float64
	IsFloat bool
	// Time the value was sampled; zero means the snapshot's time.
	Time time.Time
}

// AsFloat returns the value as a float64 whatever its type.
func (v Value) AsFloat() float64 {
	if v.IsFloat {
		return v.Float
	}
	return float64(v.Int)
}

// Owner is the workload a GPU is assigned to: a Kubernetes pod or a Slurm
// job. Empty fields are unknown.
type Owner struct {
	PodName       string // k8s.pod.name
	Namespace     string // k8s.namespace.name
	Container     string // k8s.container.name
	SlurmJobID    string // slurm.job.id
	TrainingJobID string // training.job.id
}

// IsZero reports whether nothing is known about the owner.
func (o Owner) IsZero() bool { return o == Owner{} }

// GPUSample is one GPU's readings at one time.
type GPUSample struct {
	GPU    GPU
	Values []Value
	// Owner is set by sources that already know it (dcgm-exporter's pod
	// labels); otherwise the receiver's attribution fills it in.
	Owner Owner
	// Unresponsive is set when a call for this GPU did not return within
	// its deadline (a GPU that fell off the bus can hang a driver call).
	Unresponsive bool
}

// Snapshot is what one collection returns.
type Snapshot struct {
	Time time.Time
	GPUs []GPUSample
	// ForeignSamples counts the samples a source refused because they speak
	// for another node (a dcgm-exporter page whose Hostname is not this
	// agent's): an agent speaks only for its own node.
	ForeignSamples int
}

// XIDEvent is one occurrence of an NVIDIA driver error (an XID).
type XIDEvent struct {
	Time time.Time
	// GPU holds what the source knows about the device: the kernel log only
	// names the PCI bus id, which the receiver resolves to the full GPU.
	GPU  GPU
	Code int
	// Message is the driver's text when the source has it.
	Message     string
	PID         int
	ProcessName string
	// Source is the source that reported it: dcgm, nvml, kmsg or exporter.
	Source string
}

// DCGM's sentinel values: a reading at or above the blank value means
// blank, not found, not supported or not permissioned, never a real value.
const (
	Int64Blank   int64   = 0x7ffffffffffffff0
	Float64Blank float64 = 140737488355328.0
)

// IsBlankInt64 reports whether v is one of DCGM's int64 sentinels
// (DCGM_FT_INT64_BLANK, _NOT_FOUND, _NOT_SUPPORTED, _NOT_PERMISSIONED).
func IsBlankInt64(v int64) bool { return v >= Int64Blank }

// IsBlankFloat64 reports whether v is one of DCGM's fp64 sentinels, or not
// a number at all.
func IsBlankFloat64(v float64) bool { return v >= Float64Blank || math.IsNaN(v) }
