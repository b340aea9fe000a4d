package metadata // import "github.com/otelcol-gpu/otelcol-gpu/extension/nodeauthextension/internal/metadata"

import (
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelcol-gpu/otelcol-gpu/internal/telemetry"
)

// Attribute keys of the extension's own telemetry.
const (
	// TelemetryAttrReason is why a request was refused (the Reason*
	// constants).
	TelemetryAttrReason = "reason"
	// TelemetryAttrResult is what a TokenReview or a reload of the tokens
	// file gave (the Result* constants).
	TelemetryAttrResult = "result"
)

// Values of TelemetryAttrReason: why a request was refused.
const (
	// ReasonMissingToken: no single "authorization: Bearer <token>".
	ReasonMissingToken = "missing_token"
	// ReasonUnknownToken: the token is on no line of the tokens file.
	ReasonUnknownToken = "unknown_token"
	// ReasonNotAuthenticated: the API server did not authenticate the
	// token (invalid, expired, for another audience, its pod deleted).
	ReasonNotAuthenticated = "not_authenticated"
	// ReasonWrongAudience: authenticated, but not for the configured
	// audience.
	ReasonWrongAudience = "wrong_audience"
	// ReasonWrongServiceAccount: a token of another ServiceAccount (a
	// training pod's, say).
	ReasonWrongServiceAccount = "wrong_service_account"
	// ReasonNoNode: the token is not bound to a pod on a node.
	ReasonNoNode = "no_node"
	// ReasonReviewError: the TokenReview itself failed (API server
	// unreachable, RBAC); the request is answered Unavailable, so the
	// agent keeps it and retries.
	ReasonReviewError = "review_error"
)

// Values of TelemetryAttrResult.
const (
	ResultAuthenticated = "authenticated"
	ResultRefused       = "refused"
	ResultError         = "error"
	ResultLoaded        = "loaded"
	ResultInvalid       = "invalid"
)

// TelemetryBuilder holds the instruments of the extension's own telemetry.
type TelemetryBuilder struct {
	// NodeauthRefused counts refused requests (reason).
	NodeauthRefused metric.Int64Counter
	// NodeauthReviews counts TokenReviews sent to the API server (result).
	NodeauthReviews metric.Int64Counter
	// NodeauthTokensFileReloads counts reads of the tokens file after the
	// first (result: loaded, or invalid: the previous tokens stay).
	NodeauthTokensFileReloads metric.Int64Counter
}

// Instruments of the extension's own telemetry.
var (
	refused = telemetry.Instrument{Name: "otelcol_nodeauth_refused",
		Description: "Requests the node authenticator refused, by reason.", Unit: "{request}", Stability: component.StabilityLevelAlpha}
	reviews = telemetry.Instrument{Name: "otelcol_nodeauth_reviews",
		Description: "TokenReviews the node authenticator sent to the Kubernetes API server, by result.", Unit: "{review}", Stability: component.StabilityLevelAlpha}
	reloads = telemetry.Instrument{Name: "otelcol_nodeauth_tokens_file_reloads",
		Description: "Reloads of the node authenticator's tokens file after a change, by result.", Unit: "{reload}", Stability: component.StabilityLevelAlpha}
)

// NewTelemetryBuilder creates the extension's instruments from settings.
func NewTelemetryBuilder(settings component.TelemetrySettings) (*TelemetryBuilder, error) {
	b := telemetry.NewBuilder(settings, ScopeName)
	return &TelemetryBuilder{
		NodeauthRefused:           b.Int64Counter(refused),
		NodeauthReviews:           b.Int64Counter(reviews),
		NodeauthTokensFileReloads: b.Int64Counter(reloads),
	}, b.Err()
}

// Shutdown is part of the extension's lifecycle; the instruments are all
// synchronous, so there is no callback to unregister.
func (*TelemetryBuilder) Shutdown() {}
