// Package testhook lets gpurepairtest (and only packages under
// receiver/gpurepairreceiver, Go's internal rule) build the receiver with
// its GPU seam replaced. The receiver registers NewFactory at init; the
// production factory (gpurepairreceiver.NewFactory) is untouched by it.
package testhook // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpurepairreceiver/internal/testhook"

import "go.opentelemetry.io/collector/receiver"

// NewFactory returns the receiver's factory whose Devices are devices (a
// gpurepairreceiver.Devices; anything else: nil). Set by the receiver
// package's init.
var NewFactory func(devices any) receiver.Factory
