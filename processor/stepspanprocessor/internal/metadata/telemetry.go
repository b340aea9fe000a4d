package metadata // import "github.com/otelcol-gpu/otelcol-gpu/processor/stepspanprocessor/internal/metadata"

import (
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelcol-gpu/otelcol-gpu/internal/telemetry"
)

// TelemetryAttrReason says why collectives were dropped.
const TelemetryAttrReason = "reason"

// ReasonPerRankCap: a rank held max_collectives_per_rank unclaimed
// collectives; the oldest went.
const ReasonPerRankCap = "per_rank_cap"

// ReasonNodeCap: all ranks together held max_collectives unclaimed
// collectives and the oldest of a rank over its share went.
const ReasonNodeCap = "node_cap"

// TelemetryBuilder holds the processor's own instruments (metadata.yaml).
type TelemetryBuilder struct {
	// ProcessorStepspanCollectivesDropped counts collective spans dropped
	// before any step claimed them.
	ProcessorStepspanCollectivesDropped metric.Int64Counter
}

var collectivesDropped = telemetry.Instrument{Name: "otelcol_processor_stepspan_collectives_dropped",
	Description: "Collective spans dropped before a step claimed them (reason).",
	Unit:        "{span}", Stability: component.StabilityLevelDevelopment}

// NewTelemetryBuilder creates the processor's instruments from settings.
func NewTelemetryBuilder(settings component.TelemetrySettings) (*TelemetryBuilder, error) {
	b := telemetry.NewBuilder(settings, ScopeName)
	return &TelemetryBuilder{ProcessorStepspanCollectivesDropped: b.Int64Counter(collectivesDropped)}, b.Err()
}
