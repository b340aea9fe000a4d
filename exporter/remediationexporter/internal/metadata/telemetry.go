package metadata // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/metadata"

import (
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelcol-gpu/otelcol-gpu/internal/telemetry"
)

// TelemetryAttrReason is the attribute that says which cap refused a
// webhook post (bounded: node, source, page; never the node's name).
const TelemetryAttrReason = "reason"

// TelemetryBuilder holds the instruments of the exporter's own telemetry;
// metadata.yaml documents them.
type TelemetryBuilder struct {
	// ExporterRemediationWebhookPostsCapped counts webhook posts not sent
	// because a per-node, per-source or page cap was reached.
	ExporterRemediationWebhookPostsCapped metric.Int64Counter
	// ExporterRemediationDecisionsPublished counts decisions this replica
	// published to the decision log.
	ExporterRemediationDecisionsPublished metric.Int64Counter
	// ExporterRemediationDecisionsSkipped counts records not decided again
	// because the decision log already held their decision (a redelivery
	// after a failover).
	ExporterRemediationDecisionsSkipped metric.Int64Counter
	// ExporterRemediationDecisionKeysEvicted counts decided keys forgotten
	// over decisions.max_keys: a redelivery of one of them would be decided
	// again.
	ExporterRemediationDecisionKeysEvicted metric.Int64Counter
}

var (
	postsCapped = telemetry.Instrument{Name: "otelcol_exporter_remediation_webhook_posts_capped",
		Description: "Webhook posts not sent because a per-node, per-source or page cap was reached (reason).",
		Unit:        "{post}", Stability: component.StabilityLevelDevelopment}
	decisionsPublished = telemetry.Instrument{Name: "otelcol_exporter_remediation_decisions_published",
		Description: "Decisions this replica published to the decision log.",
		Unit:        "{decision}", Stability: component.StabilityLevelDevelopment}
	decisionsSkipped = telemetry.Instrument{Name: "otelcol_exporter_remediation_decisions_skipped",
		Description: "Records not decided again because the decision log already held their decision.",
		Unit:        "{record}", Stability: component.StabilityLevelDevelopment}
	decisionKeysEvicted = telemetry.Instrument{Name: "otelcol_exporter_remediation_decision_keys_evicted",
		Description: "Decided keys forgotten over decisions.max_keys.",
		Unit:        "{key}", Stability: component.StabilityLevelDevelopment}
)

// NewTelemetryBuilder creates the exporter's instruments from settings.
func NewTelemetryBuilder(settings component.TelemetrySettings) (*TelemetryBuilder, error) {
	b := telemetry.NewBuilder(settings, ScopeName)
	return &TelemetryBuilder{
		ExporterRemediationWebhookPostsCapped:  b.Int64Counter(postsCapped),
		ExporterRemediationDecisionsPublished:  b.Int64Counter(decisionsPublished),
		ExporterRemediationDecisionsSkipped:    b.Int64Counter(decisionsSkipped),
		ExporterRemediationDecisionKeysEvicted: b.Int64Counter(decisionKeysEvicted),
	}, b.Err()
}
