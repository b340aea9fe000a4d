// Package metadata holds the identity of the remediation exporter (type,
// scope name, stability), written by hand in the shape mdatagen produces.
// metadata.yaml next to the exporter documents the same facts;
// metadata_conformance_test.go there checks that they agree.
package metadata // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/metadata"

import "go.opentelemetry.io/collector/component"

var (
	// Type is the component type: "remediation".
	Type = component.MustNewType("remediation")
	// ScopeName is the instrumentation scope of the exporter's own telemetry.
	ScopeName = "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter"
)

// LogsStability is the stability of the logs signal (fault records).
const LogsStability = component.StabilityLevelDevelopment
