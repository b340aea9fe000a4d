// Package metadata holds the identity of the nodeauth extension (type,
// scope name, stability) and the declarations of its internal telemetry,
// written by hand in the shape mdatagen produces. metadata.yaml next to the
// extension documents the same facts; metadata_conformance_test.go there
// checks that they agree.
package metadata // import "github.com/otelcol-gpu/otelcol-gpu/extension/nodeauthextension/internal/metadata"

import (
	"go.opentelemetry.io/collector/component"
)

var (
	// Type is the component type of the extension: "nodeauth".
	Type = component.MustNewType("nodeauth")
	// ScopeName is the instrumentation scope of the extension's telemetry.
	ScopeName = "github.com/otelcol-gpu/otelcol-gpu/extension/nodeauthextension"
)

const (
	// ExtensionStability is the stability of the extension.
	ExtensionStability = component.StabilityLevelAlpha
)
