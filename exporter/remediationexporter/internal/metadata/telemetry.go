package metadata // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/metadata"

import (
	"errors"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelcol-gpu/otelcol-gpu/internal/telemetry"
)

// Attributes of the exporter's own telemetry. Every value is bounded: a
// node's name is never an attribute (it is in the audit entry).
const (
	// TelemetryAttrReason says which cap refused a webhook post (node,
	// source, page).
	TelemetryAttrReason = "reason"
	// TelemetryAttrAction is the node decision: quarantine or release.
	TelemetryAttrAction = "action"
	// TelemetryAttrOutcome is a decision's outcome: acted, dry_run,
	// refused (a rail stopped it), skipped (nothing to do) or failed.
	TelemetryAttrOutcome = "outcome"
	// TelemetryAttrRail is the rail that refused a decision (only with
	// outcome refused): breaker, cooldown, quarantine_cap, hold, or the
	// platform's answer (foreign, excluded, not_found, no_gpu, not_ours).
	TelemetryAttrRail = "rail"
	// TelemetryAttrPlatform is the platform's name (kubernetes, slurm).
	TelemetryAttrPlatform = "platform"
	// TelemetryAttrOperation is the platform call: check, quarantine,
	// release, breaker_tripped, breaker_admit, breaker_refund, breaker_trip,
	// breaker_state, breaker_reset.
	TelemetryAttrOperation = "operation"
)

// PlatformCallBuckets are the bucket bounds, in seconds, of the platform
// call latency: an API server or slurmctld answers in milliseconds when
// healthy and in seconds when overloaded; past 30 s a call is as good as
// failed.
var PlatformCallBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// TelemetryBuilder holds the instruments of the exporter's own telemetry;
// metadata.yaml documents them. Every name starts with otelcol_remediation_
// (the and the runbooks' name for them): the component's type, as
// the other components of this distribution name theirs (otelcol_dcgm_,
// otelcol_faultcorrelator_).
type TelemetryBuilder struct {
	// RemediationWebhookPostsCapped counts webhook posts not sent because
	// a per-node, per-source or page cap was reached.
	RemediationWebhookPostsCapped metric.Int64Counter
	// RemediationDecisionLogPublished counts decisions this replica
	// published to the decision log.
	RemediationDecisionLogPublished metric.Int64Counter
	// RemediationDecisionLogSkipped counts records not decided again
	// because the decision log already held their decision (a redelivery
	// after a failover).
	RemediationDecisionLogSkipped metric.Int64Counter
	// RemediationDecisionLogKeysEvicted counts decided keys forgotten over
	// decisions.max_keys: a redelivery of one of them would be decided
	// again.
	RemediationDecisionLogKeysEvicted metric.Int64Counter
	// RemediationDecisions counts quarantine and release decisions by
	// action, outcome and, when refused, rail.
	RemediationDecisions metric.Int64Counter
	// RemediationPlatformCallDuration is the latency of each platform
	// call (each attempt), by platform and operation.
	RemediationPlatformCallDuration metric.Float64Histogram
	// RemediationPlatformCallErrors counts platform calls (attempts) that
	// returned an error, by platform and operation.
	RemediationPlatformCallErrors metric.Int64Counter
	// RemediationBreakerTripped is 1 while the platform's circuit breaker
	// is tripped, 0 while closed; recorded each time it is read (before
	// every quarantine, and every minute while tripped).
	RemediationBreakerTripped metric.Int64Gauge
	// RemediationBreakerTrips counts the trips this replica caused.
	RemediationBreakerTrips metric.Int64Counter
	// RemediationQuarantinedNodes is the number of nodes quarantined by
	// this exporter, after every decision.
	RemediationQuarantinedNodes metric.Int64Gauge
	// RemediationQuarantineCapRefusals and RemediationQuarantineCapWaiting:
	// quarantinecap.go.
	RemediationQuarantineCapRefusals metric.Int64Counter
	RemediationQuarantineCapWaiting  metric.Int64Gauge
	// The repair loop's (repair.go): time per step, time to recovery,
	// nodes per step, repairs by action and outcome, step timeouts.
	RemediationLifecycleStepSeconds  metric.Float64Histogram
	RemediationTimeToRecovery        metric.Float64Histogram
	RemediationLifecycleNodes        metric.Int64Gauge
	RemediationRepairs               metric.Int64Counter
	RemediationLifecycleStepTimeouts metric.Int64Counter
}

var (
	postsCapped = telemetry.Instrument{Name: "otelcol_remediation_webhook_posts_capped",
		Description: "Webhook posts not sent because a per-node, per-source or page cap was reached (reason).",
		Unit:        "{post}", Stability: component.StabilityLevelDevelopment}
	logPublished = telemetry.Instrument{Name: "otelcol_remediation_decision_log_published",
		Description: "Decisions this replica published to the decision log.",
		Unit:        "{decision}", Stability: component.StabilityLevelDevelopment}
	logSkipped = telemetry.Instrument{Name: "otelcol_remediation_decision_log_skipped",
		Description: "Records not decided again because the decision log already held their decision.",
		Unit:        "{record}", Stability: component.StabilityLevelDevelopment}
	logKeysEvicted = telemetry.Instrument{Name: "otelcol_remediation_decision_log_keys_evicted",
		Description: "Decided keys forgotten over decisions.max_keys.",
		Unit:        "{key}", Stability: component.StabilityLevelDevelopment}
	decisions = telemetry.Instrument{Name: "otelcol_remediation_decisions",
		Description: "Quarantine, release and breaker reset decisions, by action, outcome (acted, dry_run, refused, skipped, failed) and, when refused, rail.",
		Unit:        "{decision}", Stability: component.StabilityLevelDevelopment}
	callDuration = telemetry.Instrument{Name: "otelcol_remediation_platform_call_duration_seconds",
		Description: "Latency of each platform call attempt, by platform and operation.",
		Unit:        "s", Stability: component.StabilityLevelDevelopment}
	callErrors = telemetry.Instrument{Name: "otelcol_remediation_platform_call_errors",
		Description: "Platform call attempts that returned an error, by platform and operation.",
		Unit:        "{call}", Stability: component.StabilityLevelDevelopment}
	breakerTripped = telemetry.Instrument{Name: "otelcol_remediation_breaker_tripped",
		Description: "1 while the platform's circuit breaker is tripped, 0 while it is closed; recorded each time it is consulted.",
		Unit:        "1", Stability: component.StabilityLevelDevelopment}
	breakerTrips = telemetry.Instrument{Name: "otelcol_remediation_breaker_trips",
		Description: "Circuit breaker trips: quarantines the breaker refused while it was closed.",
		Unit:        "{trip}", Stability: component.StabilityLevelDevelopment}
	quarantinedNodes = telemetry.Instrument{Name: "otelcol_remediation_quarantined_nodes",
		Description: "Nodes quarantined by this exporter (in a dry run: the nodes it would hold).",
		Unit:        "{node}", Stability: component.StabilityLevelDevelopment}
)

// NewTelemetryBuilder creates the exporter's instruments from settings.
func NewTelemetryBuilder(settings component.TelemetrySettings) (*TelemetryBuilder, error) {
	b := telemetry.NewBuilder(settings, ScopeName)
	tb := &TelemetryBuilder{
		RemediationWebhookPostsCapped:     b.Int64Counter(postsCapped),
		RemediationDecisionLogPublished:   b.Int64Counter(logPublished),
		RemediationDecisionLogSkipped:     b.Int64Counter(logSkipped),
		RemediationDecisionLogKeysEvicted: b.Int64Counter(logKeysEvicted),
		RemediationDecisions:              b.Int64Counter(decisions),
		RemediationPlatformCallErrors:     b.Int64Counter(callErrors),
		RemediationBreakerTripped:         b.Int64Gauge(breakerTripped),
		RemediationBreakerTrips:           b.Int64Counter(breakerTrips),
		RemediationQuarantinedNodes:       b.Int64Gauge(quarantinedNodes),
		RemediationQuarantineCapRefusals:  b.Int64Counter(capRefusals),
		RemediationQuarantineCapWaiting:   b.Int64Gauge(capWaiting),
	}
	// internal/telemetry has no histogram helper (it is shared; the fault
	// correlator creates its histogram the same way): created here with
	// the same description rule.
	var err error
	tb.RemediationPlatformCallDuration, err = settings.MeterProvider.Meter(ScopeName).Float64Histogram(callDuration.Name,
		metric.WithDescription(callDuration.FullDescription()), metric.WithUnit(callDuration.Unit),
		metric.WithExplicitBucketBoundaries(PlatformCallBuckets...))
	errRepair := repairInstruments(b, settings.MeterProvider.Meter(ScopeName), tb)
	return tb, errors.Join(b.Err(), err, errRepair)
}
