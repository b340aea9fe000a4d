// Package metadata holds the identity of the dcgm receiver (type, scope
// name, stability) and the declarations of its internal telemetry, written
// by hand in the shape mdatagen produces. metadata.yaml next to the receiver
// documents the same facts; metadata_conformance_test.go there checks that
// they agree.
package metadata // import "github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/metadata"

import (
	"go.opentelemetry.io/collector/component"

	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

var (
	// Type is the component type of the receiver: "dcgm".
	Type = component.MustNewType("dcgm")
	// ScopeName is the instrumentation scope of what the receiver emits and
	// of its own telemetry.
	ScopeName = semconv.ScopeDCGMReceiver
)

const (
	// MetricsStability is the stability of the metrics signal.
	MetricsStability = component.StabilityLevelAlpha
	// LogsStability is the stability of the logs signal (XID events).
	LogsStability = component.StabilityLevelAlpha
)
