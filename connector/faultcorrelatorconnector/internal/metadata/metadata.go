// Package metadata holds the identity of the faultcorrelator connector
// (type, scope name, stability) and the declarations of its internal
// telemetry, written by hand in the shape mdatagen produces. metadata.yaml
// next to the connector documents the same facts;
// metadata_conformance_test.go there checks that they agree.
package metadata // import "github.com/otelcol-gpu/otelcol-gpu/connector/faultcorrelatorconnector/internal/metadata"

import (
	"go.opentelemetry.io/collector/component"

	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

var (
	// Type is the component type: "faultcorrelator".
	Type = component.MustNewType("faultcorrelator")
	// ScopeName is the instrumentation scope of the fault records and of the
	// connector's own telemetry.
	ScopeName = semconv.ScopeFaultRecords
)

// Stability of each path (traces, metrics and logs into logs).
const (
	TracesToLogsStability  = component.StabilityLevelDevelopment
	MetricsToLogsStability = component.StabilityLevelDevelopment
	LogsToLogsStability    = component.StabilityLevelDevelopment
)
