// Package source defines what a GPU source gives the dcgm receiver. Each
// backend (DCGM, NVML, a dcgm-exporter endpoint) lives in its own package
// below and produces the shared model, so the receiver's output does not
// depend on where the numbers came from.
package source // import "github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/source"

import (
	"context"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
)

// XIDSink receives every XID occurrence a source sees, from the source's own
// goroutine. It must not block for long.
type XIDSink func(model.XIDEvent)

// Metrics is a source of GPU field values.
type Metrics interface {
	// Start connects to the backend. An error means "not now": the receiver
	// logs it once and calls Start again with backoff, while the collector
	// keeps running. XIDs the source learns of go to xids.
	Start(ctx context.Context, xids XIDSink) error
	// Collect reads the given fields of every GPU. A field a GPU does not
	// support is left out of its sample, never reported as a sentinel. A GPU
	// whose call hangs is returned with Unresponsive set.
	Collect(ctx context.Context, fields []model.FieldID) (model.Snapshot, error)
	// Shutdown releases the backend. It must return promptly even if a call
	// to the hardware is stuck.
	Shutdown(ctx context.Context) error
}

// Health is a Metrics source that also runs DCGM's health watches (the
// dcgm source; NVML and dcgm-exporter have none). The receiver checks it
// after each collection of the device fields, once the source started.
type Health interface {
	// CheckHealth sets the watches the first time (and again after a
	// reconnect) and returns what they report now. An error means the
	// check could not be made: the receiver keeps the last known state.
	CheckHealth(ctx context.Context) (model.HealthReport, error)
}

// XIDs is a source of XID events alone (the kernel log).
type XIDs interface {
	// Run delivers events to sink until ctx is cancelled.
	Run(ctx context.Context, sink XIDSink) error
}
