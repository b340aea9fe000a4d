// Package dcgmsrc is the dcgm receiver's default source: NVIDIA DCGM
// through go-dcgm, standalone (a running nv-hostengine) or embedded.
//
// Everything DCGM does wrong in production is handled here rather than in
// the receiver: a missing libdcgm.so.4 (Start fails, no other call is ever
// made), nv-hostengine restarting (reconnect, re-create the field groups,
// no duplicate or lost XIDs), profiling counters taken by Nsight/CUPTI
// (back off, keep the device fields), GPUs that do not support profiling
// (fields dropped with one log line per GPU), a GPU whose calls hang
// (reported Unresponsive, the others go on, Shutdown does not wait), and
// DCGM's blank / not-supported sentinels (never emitted).
//
// Health watches (healthwatch.go): DCGM's health watches on one group of
// every GPU (and NVSwitch), set once per connection and checked at each
// collection (source.Health).
//
// fakeapi.go holds a DCGM without hardware (NewFakeDCGM,
// NewFakeConnections) for the dcgm receiver's tests, which drive the real
// Source through it; nothing in production calls it.
//
// MIG: each GPU instance of a GPU in MIG mode is a sample of its own, right
// after its parent's (see mig.go).
package dcgmsrc // import "github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/source/dcgmsrc"
