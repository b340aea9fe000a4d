// Package fault defines the fault record that the faultcorrelator emits on
// the gpu_faults logs pipeline (docs/fault-record.md): its Go types, its
// stable id, its encoding as an OpenTelemetry log record, and the edge rule
// that strips fault.* attributes from telemetry arriving over OTLP so that a
// training pod cannot forge a fault. It holds no package-level state.
package fault
