package metadata // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/metadata"

import (
	"errors"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelcol-gpu/otelcol-gpu/internal/telemetry"
)

// TelemetryAttrStep is a repair loop's step (internal/repair's Step).
const TelemetryAttrStep = "step"

// LifecycleBuckets are the bounds, in seconds, of the time spent in a step
// of the repair loop and of the time to recovery: a GPU reset takes
// seconds, a diagnostic minutes, a drain or a reboot up to hours.
var LifecycleBuckets = []float64{1, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400, 28800, 86400, 259200}

// The repair loop's instruments (repair.go, repairstep.go).
var (
	lifecycleStepSeconds = telemetry.Instrument{Name: "otelcol_remediation_lifecycle_step_seconds",
		Description: "Time a node spent in one step of the repair loop, recorded when it leaves the step, by step.",
		Unit:        "s", Stability: component.StabilityLevelDevelopment}
	timeToRecovery = telemetry.Instrument{Name: "otelcol_remediation_time_to_recovery_seconds",
		Description: "Time from a fault's onset to its node's return to service by the repair loop.",
		Unit:        "s", Stability: component.StabilityLevelDevelopment}
	lifecycleNodes = telemetry.Instrument{Name: "otelcol_remediation_lifecycle_nodes",
		Description: "Nodes in each step of the repair loop, by step.",
		Unit:        "{node}", Stability: component.StabilityLevelDevelopment}
	repairs = telemetry.Instrument{Name: "otelcol_remediation_repairs",
		Description: "Repair loop actions (gpu_reset, reboot, verify, rma) by outcome.",
		Unit:        "{repair}", Stability: component.StabilityLevelDevelopment}
	stepTimeouts = telemetry.Instrument{Name: "otelcol_remediation_lifecycle_step_timeouts",
		Description: "Repair loop steps that outlasted their bound (repair.step_timeouts), by step.",
		Unit:        "{timeout}", Stability: component.StabilityLevelDevelopment}
)

// repairInstruments adds the repair loop's instruments to tb.
func repairInstruments(b *telemetry.Builder, meter metric.Meter, tb *TelemetryBuilder) error {
	tb.RemediationLifecycleNodes = b.Int64Gauge(lifecycleNodes)
	tb.RemediationRepairs = b.Int64Counter(repairs)
	tb.RemediationLifecycleStepTimeouts = b.Int64Counter(stepTimeouts)
	var err1, err2 error
	tb.RemediationLifecycleStepSeconds, err1 = meter.Float64Histogram(lifecycleStepSeconds.Name,
		metric.WithDescription(lifecycleStepSeconds.FullDescription()), metric.WithUnit(lifecycleStepSeconds.Unit),
		metric.WithExplicitBucketBoundaries(LifecycleBuckets...))
	tb.RemediationTimeToRecovery, err2 = meter.Float64Histogram(timeToRecovery.Name,
		metric.WithDescription(timeToRecovery.FullDescription()), metric.WithUnit(timeToRecovery.Unit),
		metric.WithExplicitBucketBoundaries(LifecycleBuckets...))
	return errors.Join(err1, err2)
}
