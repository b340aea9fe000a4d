// Package metadata holds the identity of the shutdown_deadline extension
// (type, scope name, stability), written by hand in the shape mdatagen
// produces. metadata.yaml next to the extension documents the same facts;
// metadata_conformance_test.go there checks that they agree.
package metadata // import "github.com/otelcol-gpu/otelcol-gpu/extension/shutdowndeadlineextension/internal/metadata"

import (
	"go.opentelemetry.io/collector/component"
)

var (
	// Type is the component type of the extension.
	Type = component.MustNewType("shutdown_deadline")
	// ScopeName is the instrumentation scope of the extension.
	ScopeName = "github.com/otelcol-gpu/otelcol-gpu/extension/shutdowndeadlineextension"
)

const (
	// ExtensionStability is the stability of the extension.
	ExtensionStability = component.StabilityLevelAlpha
)
