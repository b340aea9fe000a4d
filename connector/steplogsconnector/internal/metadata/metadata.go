// Package metadata holds the identity of the steplogs connector (type, scope
// name, stability), written by hand in the shape mdatagen produces.
// metadata.yaml next to the connector documents the same facts;
// metadata_conformance_test.go there checks that they agree.
package metadata // import "github.com/otelcol-gpu/otelcol-gpu/connector/steplogsconnector/internal/metadata"

import (
	"go.opentelemetry.io/collector/component"
)

var (
	// Type is the component type: "steplogs".
	Type = component.MustNewType("steplogs")
	// ScopeName is the scope of the spans the connector writes.
	ScopeName = "github.com/otelcol-gpu/otelcol-gpu/connector/steplogsconnector"
)

// LogsToTracesStability is the stability of the logs → traces path.
const LogsToTracesStability = component.StabilityLevelDevelopment
