// Package metadata holds the identity of the straggler processor (type,
// scope name, stability) and its internal telemetry, written by hand in the
// shape mdatagen produces; metadata.yaml documents the same.
package metadata // import "github.com/otelcol-gpu/otelcol-gpu/processor/stragglerprocessor/internal/metadata"

import (
	"errors"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/metric"
)

var (
	// Type is the component type: "straggler".
	Type = component.MustNewType("straggler")
	// ScopeName is the scope of the root and verdict spans the processor
	// writes and of its telemetry.
	ScopeName = "github.com/otelcol-gpu/otelcol-gpu/processor/stragglerprocessor"
)

// TracesStability is the stability of the traces signal.
const TracesStability = component.StabilityLevelDevelopment

// TelemetryAttrReason says why a step was decided early or a span was left
// out of a decision.
const TelemetryAttrReason = "reason"

// TelemetryBuilder holds the instruments of the processor's own telemetry.
type TelemetryBuilder struct {
	// LateSpans counts rank step spans of steps already decided: left out
	// of every decision.
	LateSpans metric.Int64Counter
	// UnjudgedSpans counts rank step spans of open steps left out of the
	// decision (a rank reported twice, or beyond max_ranks_per_step).
	UnjudgedSpans metric.Int64Counter
	// ForcedDecisions counts steps decided before world_size ranks reported
	// or decision_wait passed, because a bound was reached.
	ForcedDecisions metric.Int64Counter
	// StepsDecided counts steps decided (one root span each).
	StepsDecided metric.Int64Counter
}

// NewTelemetryBuilder creates the processor's instruments from settings.
func NewTelemetryBuilder(settings component.TelemetrySettings) (*TelemetryBuilder, error) {
	meter := settings.MeterProvider.Meter(ScopeName)
	var b TelemetryBuilder
	var err, errs error
	b.LateSpans, err = meter.Int64Counter("otelcol_processor_straggler_late_spans",
		metric.WithDescription("Rank step spans that arrived after their step was decided; left out of every decision. [Development]"),
		metric.WithUnit("{span}"))
	errs = errors.Join(errs, err)
	b.UnjudgedSpans, err = meter.Int64Counter("otelcol_processor_straggler_unjudged_spans",
		metric.WithDescription("Rank step spans left out of their step's decision (duplicate rank, max_ranks_per_step). [Development]"),
		metric.WithUnit("{span}"))
	errs = errors.Join(errs, err)
	b.ForcedDecisions, err = meter.Int64Counter("otelcol_processor_straggler_forced_decisions",
		metric.WithDescription("Steps decided early because a bound was reached (max_open_steps_per_job, max_held_ranks, max_jobs). [Development]"),
		metric.WithUnit("{step}"))
	errs = errors.Join(errs, err)
	b.StepsDecided, err = meter.Int64Counter("otelcol_processor_straggler_steps_decided",
		metric.WithDescription("Steps decided; one root span each. [Development]"),
		metric.WithUnit("{step}"))
	errs = errors.Join(errs, err)
	return &b, errs
}
