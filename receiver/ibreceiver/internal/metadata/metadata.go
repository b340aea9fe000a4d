// Package metadata holds the identity of the ib receiver (type, scope name,
// stability) and its internal telemetry. It is written by hand in the shape
// that mdatagen produces for contrib components; metadata.yaml next to the
// receiver documents the same facts.
package metadata // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ibreceiver/internal/metadata"

import (
	"go.opentelemetry.io/collector/component"
)

var (
	// Type is the component type of the receiver: "ib".
	Type = component.MustNewType("ib")
	// ScopeName is the instrumentation scope of the metrics the receiver
	// emits and of its own telemetry.
	ScopeName = "github.com/otelcol-gpu/otelcol-gpu/receiver/ibreceiver"
)

const (
	// MetricsStability is the stability of the metrics signal.
	MetricsStability = component.StabilityLevelAlpha
)
