// Package metadata holds the identity of the stepspan processor (type, scope
// name, stability), written by hand in the shape mdatagen produces.
// metadata.yaml next to the processor documents the same facts;
// metadata_conformance_test.go there checks that they agree.
package metadata // import "github.com/otelcol-gpu/otelcol-gpu/processor/stepspanprocessor/internal/metadata"

import (
	"go.opentelemetry.io/collector/component"
)

var (
	// Type is the component type: "stepspan".
	Type = component.MustNewType("stepspan")
	// ScopeName is the scope of the spans the processor writes.
	ScopeName = "github.com/otelcol-gpu/otelcol-gpu/processor/stepspanprocessor"
)

// TracesStability is the stability of the traces signal.
const TracesStability = component.StabilityLevelDevelopment
