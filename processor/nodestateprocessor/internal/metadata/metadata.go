// Package metadata holds the identity of the nodestate processor (type,
// scope name, stability), written by hand in the shape mdatagen produces.
// metadata.yaml next to the processor documents the same facts;
// metadata_conformance_test.go there checks that they agree.
package metadata // import "github.com/otelcol-gpu/otelcol-gpu/processor/nodestateprocessor/internal/metadata"

import (
	"go.opentelemetry.io/collector/component"
)

var (
	// Type is the component type of the processor: "nodestate".
	Type = component.MustNewType("nodestate")
	// ScopeName is the instrumentation scope of the processor's telemetry.
	ScopeName = "github.com/otelcol-gpu/otelcol-gpu/processor/nodestateprocessor"
)

const (
	// MetricsStability is the stability of the metrics signal.
	MetricsStability = component.StabilityLevelAlpha
	// LogsStability is the stability of the logs signal.
	LogsStability = component.StabilityLevelAlpha
)
