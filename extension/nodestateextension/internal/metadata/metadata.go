// Package metadata holds the identity of the nodestate extension (type,
// scope name, stability) and its internal telemetry. It is written by hand
// in the shape that mdatagen produces for contrib components; metadata.yaml
// next to the extension documents the same facts.
package metadata // import "github.com/otelcol-gpu/otelcol-gpu/extension/nodestateextension/internal/metadata"

import (
	"go.opentelemetry.io/collector/component"
)

var (
	// Type is the component type of the extension: "nodestate".
	Type = component.MustNewType("nodestate")
	// ScopeName is the instrumentation scope of the extension's telemetry.
	ScopeName = "github.com/otelcol-gpu/otelcol-gpu/extension/nodestateextension"
)

const (
	// ExtensionStability is the stability of the extension.
	ExtensionStability = component.StabilityLevelAlpha
)
