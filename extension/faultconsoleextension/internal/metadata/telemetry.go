package metadata // import "github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/internal/metadata"

import (
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelcol-gpu/otelcol-gpu/internal/telemetry"
)

// Attribute keys of the extension's own telemetry.
const (
	// TelemetryAttrRoute is the API route pattern ("/api/v1/faults/{id}"),
	// "page" for the page, "unmatched" for anything else.
	TelemetryAttrRoute = "route"
	// TelemetryAttrMethod is the HTTP method.
	TelemetryAttrMethod = "method"
	// TelemetryAttrCode is the HTTP status code answered.
	TelemetryAttrCode = "code"
	// TelemetryAttrReason is why a request was refused (content_type,
	// body_too_large, bad_body, bad_forward, not_owner, owner_unknown,
	// forward_loop, forward_failed) or what was evicted (capacity,
	// retention).
	TelemetryAttrReason = "reason"
	// TelemetryAttrKind is what the store forgot: fault, job or step.
	TelemetryAttrKind = "kind"
)

// TelemetryBuilder holds the instruments of the extension's own telemetry.
type TelemetryBuilder struct {
	// FaultconsoleRequests counts answered requests by route, method and code.
	FaultconsoleRequests metric.Int64Counter
	// FaultconsoleUnauthorizedRequests counts API requests without the right
	// bearer token.
	FaultconsoleUnauthorizedRequests metric.Int64Counter
	// FaultconsoleRefusedRequests counts authorized requests refused for
	// their form (content type, body size, body).
	FaultconsoleRefusedRequests metric.Int64Counter
	// FaultconsoleEvictions counts what the bounded store forgot.
	FaultconsoleEvictions metric.Int64Counter
	// FaultconsoleForwardedRequests counts controls a standby forwarded to
	// the owner, by route and the owner's status code.
	FaultconsoleForwardedRequests metric.Int64Counter
}

// Instruments of the extension's own telemetry.
var (
	requests     = telemetry.Instrument{Name: "otelcol_faultconsole_requests", Description: "Number of HTTP requests the fault console answered, by route, method and status code.", Unit: "{request}", Stability: component.StabilityLevelAlpha}
	unauthorized = telemetry.Instrument{Name: "otelcol_faultconsole_unauthorized_requests", Description: "Number of fault console API requests refused for a missing or wrong bearer token.", Unit: "{request}", Stability: component.StabilityLevelAlpha}
	refused      = telemetry.Instrument{Name: "otelcol_faultconsole_refused_requests", Description: "Number of authorized fault console requests refused for their form, by reason.", Unit: "{request}", Stability: component.StabilityLevelAlpha}
	forwarded    = telemetry.Instrument{Name: "otelcol_faultconsole_forwarded_requests", Description: "Number of controls a standby's fault console forwarded to the owner's, by route and the owner's status code.", Unit: "{request}", Stability: component.StabilityLevelAlpha}
	evictions    = telemetry.Instrument{Name: "otelcol_faultconsole_evictions", Description: "Number of faults, jobs and steps the fault console store forgot, by kind and reason.", Unit: "{entry}", Stability: component.StabilityLevelAlpha}
)

// NewTelemetryBuilder creates the extension's instruments from settings.
func NewTelemetryBuilder(settings component.TelemetrySettings) (*TelemetryBuilder, error) {
	b := telemetry.NewBuilder(settings, ScopeName)
	return &TelemetryBuilder{
		FaultconsoleRequests:             b.Int64Counter(requests),
		FaultconsoleUnauthorizedRequests: b.Int64Counter(unauthorized),
		FaultconsoleRefusedRequests:      b.Int64Counter(refused),
		FaultconsoleEvictions:            b.Int64Counter(evictions),
		FaultconsoleForwardedRequests:    b.Int64Counter(forwarded),
	}, b.Err()
}

// Shutdown is part of the extension's lifecycle; the instruments are all
// synchronous, so there is no callback to unregister.
func (*TelemetryBuilder) Shutdown() {}
