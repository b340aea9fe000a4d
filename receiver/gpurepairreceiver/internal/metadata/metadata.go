// Package metadata holds the identity of the gpu_repair receiver (type,
// scope name, stability) and the declarations of its internal telemetry,
// written by hand in the shape mdatagen produces. metadata.yaml next to the
// receiver documents the same facts; metadata_conformance_test.go there
// checks that they agree.
package metadata // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpurepairreceiver/internal/metadata"

import (
	"go.opentelemetry.io/collector/component"
)

var (
	// Type is the component type of the receiver: "gpu_repair".
	Type = component.MustNewType("gpu_repair")
	// ScopeName is the instrumentation scope of the receiver's records and
	// of its own telemetry.
	ScopeName = "github.com/otelcol-gpu/otelcol-gpu/receiver/gpurepairreceiver"
)

const (
	// LogsStability is the stability of the logs signal.
	LogsStability = component.StabilityLevelDevelopment
)
