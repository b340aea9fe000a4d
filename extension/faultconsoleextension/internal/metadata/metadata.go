// Package metadata holds the identity of the faultconsole extension (type,
// scope name, stability) and the declarations of its internal telemetry,
// written by hand in the shape mdatagen produces. metadata.yaml next to the
// extension documents the same facts; metadata_conformance_test.go there
// checks that they agree.
package metadata // import "github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/internal/metadata"

import (
	"go.opentelemetry.io/collector/component"
)

var (
	// Type is the component type of the extension: "faultconsole".
	Type = component.MustNewType("faultconsole")
	// ScopeName is the instrumentation scope of the extension's telemetry.
	ScopeName = "github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension"
)

const (
	// ExtensionStability is the stability of the extension.
	ExtensionStability = component.StabilityLevelAlpha
)
