// Package metadata holds the identity of the election extension (type,
// scope name, stability), written by hand in the shape mdatagen produces.
// metadata.yaml next to the extension documents the same facts;
// metadata_conformance_test.go there checks that they agree.
package metadata // import "github.com/otelcol-gpu/otelcol-gpu/extension/electionextension/internal/metadata"

import (
	"go.opentelemetry.io/collector/component"

	"github.com/otelcol-gpu/otelcol-gpu/internal/ownership"
)

var (
	// Type is the component type of the extension: "election", the type
	// ownership.FromHost looks for.
	Type = component.MustNewType(ownership.ExtensionType)
	// ScopeName is the instrumentation scope of the extension.
	ScopeName = "github.com/otelcol-gpu/otelcol-gpu/extension/electionextension"
)

const (
	// ExtensionStability is the stability of the extension.
	ExtensionStability = component.StabilityLevelAlpha
)
