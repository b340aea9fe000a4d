// Package metadata holds the identity of the straggler processor (type,
// scope name, stability) and the declarations of its internal telemetry,
// written by hand in the shape mdatagen produces. metadata.yaml next to the
// processor documents the same facts; metadata_conformance_test.go there
// checks that they agree.
package metadata // import "github.com/otelcol-gpu/otelcol-gpu/processor/stragglerprocessor/internal/metadata"

import (
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelcol-gpu/otelcol-gpu/internal/telemetry"
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
	// decision (a rank reported twice, beyond max_ranks_per_step, or whose
	// wait was left in its compute while most of its step's ranks took it out).
	UnjudgedSpans metric.Int64Counter
	// ForcedDecisions counts steps decided before world_size ranks reported
	// or decision_wait passed, because a bound was reached.
	ForcedDecisions metric.Int64Counter
	// StepsDecided counts steps decided (one root span each).
	StepsDecided metric.Int64Counter
	// JobsClockSkew counts jobs whose node clocks disagreed by more than
	// clock_skew_warning (one warning each).
	JobsClockSkew metric.Int64Counter
	// JobsWithoutCommSplit counts jobs whose step records cannot show a
	// straggler: backward includes the collective wait (no
	// training.phase.comm_wait_ns, no flight-recorder tail) (one warning
	// each).
	JobsWithoutCommSplit metric.Int64Counter
}

// Instruments of the processor's own telemetry.
var (
	lateSpans       = telemetry.Instrument{Name: "otelcol_processor_straggler_late_spans", Description: "Rank step spans that arrived after their step was decided; left out of every decision.", Unit: "{span}", Stability: component.StabilityLevelDevelopment}
	unjudgedSpans   = telemetry.Instrument{Name: "otelcol_processor_straggler_unjudged_spans", Description: "Rank step spans left out of their step's decision (duplicate rank, max_ranks_per_step, a wait not separated from compute while most of the step's ranks separated it).", Unit: "{span}", Stability: component.StabilityLevelDevelopment}
	forcedDecisions = telemetry.Instrument{Name: "otelcol_processor_straggler_forced_decisions", Description: "Steps decided early because a bound was reached (max_open_steps_per_job, max_held_ranks, max_jobs).", Unit: "{step}", Stability: component.StabilityLevelDevelopment}
	stepsDecided    = telemetry.Instrument{Name: "otelcol_processor_straggler_steps_decided", Description: "Steps decided; one root span each.", Unit: "{step}", Stability: component.StabilityLevelDevelopment}
	jobsClockSkew   = telemetry.Instrument{Name: "otelcol_processor_straggler_jobs_clock_skew", Description: "Jobs whose node clocks disagreed by more than clock_skew_warning; one warning each.", Unit: "{job}", Stability: component.StabilityLevelDevelopment}
	jobsNoCommSplit = telemetry.Instrument{Name: "otelcol_processor_straggler_jobs_without_comm_split", Description: "Jobs whose step records cannot show a straggler: backward includes the collective wait (no training.phase.comm_wait_ns, no flight-recorder tail); one warning each.", Unit: "{job}", Stability: component.StabilityLevelDevelopment}
)

// NewTelemetryBuilder creates the processor's instruments from settings.
func NewTelemetryBuilder(settings component.TelemetrySettings) (*TelemetryBuilder, error) {
	b := telemetry.NewBuilder(settings, ScopeName)
	return &TelemetryBuilder{
		LateSpans:            b.Int64Counter(lateSpans),
		UnjudgedSpans:        b.Int64Counter(unjudgedSpans),
		ForcedDecisions:      b.Int64Counter(forcedDecisions),
		StepsDecided:         b.Int64Counter(stepsDecided),
		JobsClockSkew:        b.Int64Counter(jobsClockSkew),
		JobsWithoutCommSplit: b.Int64Counter(jobsNoCommSplit),
	}, b.Err()
}
