// Package metadata holds the identity of the ib receiver (type, scope name,
// stability) and the declarations of its internal telemetry, written by hand
// in the shape mdatagen produces. metadata.yaml next to the receiver
// documents the same facts; metadata_conformance_test.go there checks that
// they agree.
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
