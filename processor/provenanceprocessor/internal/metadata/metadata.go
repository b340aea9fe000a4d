// Package metadata holds the identity of the provenance processor (type,
// scope name, stability) and the declarations of its internal telemetry,
// written by hand in the shape mdatagen produces. metadata.yaml next to the
// processor documents the same facts; metadata_conformance_test.go there
// checks that they agree.
package metadata // import "github.com/otelcol-gpu/otelcol-gpu/processor/provenanceprocessor/internal/metadata"

import (
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelcol-gpu/otelcol-gpu/internal/telemetry"
)

var (
	// Type is the component type: "provenance".
	Type = component.MustNewType("provenance")
	// ScopeName is the scope of the processor's telemetry.
	ScopeName = "github.com/otelcol-gpu/otelcol-gpu/processor/provenanceprocessor"
)

// Stability of each signal.
const (
	TracesStability  = component.StabilityLevelDevelopment
	LogsStability    = component.StabilityLevelDevelopment
	MetricsStability = component.StabilityLevelDevelopment
)

// TelemetryAttrReason is the attribute of rejected_claims: what was
// renamed. Its values are the Reason* constants.
const TelemetryAttrReason = "reason"

// Values of TelemetryAttrReason.
const (
	ReasonHostName       = "host_name"
	ReasonGPU            = "gpu"
	ReasonHardwareSignal = "hardware_signal"
	ReasonFaultAttribute = "fault_attribute"
	// ReasonRepeatedKey counts records refused because a map of theirs
	// (or their scope's or resource's) names a key twice.
	ReasonRepeatedKey = "repeated_key"
	// ReasonTooDeep counts records refused because a value of theirs nests
	// deeper than the check follows (internal/otlpmap.MaxDepth).
	ReasonTooDeep = "too_deep"
	// ReasonNoCredential counts requests refused whole in the
	// bind_to_auth mode: no authenticated node to bind them to.
	ReasonNoCredential = "no_credential"
)

// TelemetryBuilder holds the instruments of the processor's own telemetry.
type TelemetryBuilder struct {
	// RejectedClaims counts the claims renamed under forged. and the
	// records refused as not canonical (reason).
	RejectedClaims metric.Int64Counter
}

var rejectedClaims = telemetry.Instrument{
	Name:        "otelcol_processor_provenance_rejected_claims",
	Description: "Claims of OTLP senders renamed under forged. because only the agent's own receivers may make them, and records refused because a map of theirs repeats a key or nests too deep (reason).",
	Unit:        "{claim}",
	Stability:   component.StabilityLevelDevelopment,
}

// NewTelemetryBuilder creates the processor's instruments from settings.
func NewTelemetryBuilder(settings component.TelemetrySettings) (*TelemetryBuilder, error) {
	b := telemetry.NewBuilder(settings, ScopeName)
	return &TelemetryBuilder{RejectedClaims: b.Int64Counter(rejectedClaims)}, b.Err()
}
