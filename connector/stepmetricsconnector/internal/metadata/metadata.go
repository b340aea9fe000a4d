// Package metadata holds the identity of the stepmetrics connector (type,
// scope name, stability) and the declarations of its internal telemetry,
// written by hand in the shape mdatagen produces. metadata.yaml next to the
// connector documents the same facts; metadata_conformance_test.go there
// checks that they agree.
package metadata // import "github.com/otelcol-gpu/otelcol-gpu/connector/stepmetricsconnector/internal/metadata"

import (
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelcol-gpu/otelcol-gpu/internal/telemetry"
)

var (
	// Type is the component type: "stepmetrics".
	Type = component.MustNewType("stepmetrics")
	// ScopeName is the instrumentation scope of the metrics the connector
	// writes and of its own telemetry.
	ScopeName = "github.com/otelcol-gpu/otelcol-gpu/connector/stepmetricsconnector"
)

// TracesToMetricsStability is the stability of the traces → metrics path.
const TracesToMetricsStability = component.StabilityLevelDevelopment

// Attributes of the connector's own telemetry.
const (
	TelemetryAttrReason    = "reason"
	TelemetryAttrAttribute = "attribute"
)

// TelemetryBuilder holds the instruments of the connector's own telemetry.
type TelemetryBuilder struct {
	// StepmetricsSpansDropped counts train.step spans not used at all, by
	// reason.
	StepmetricsSpansDropped metric.Int64Counter
	// StepmetricsAttributesSkipped counts attributes of used spans that were
	// ignored (not numeric, NaN, Inf, negative, out of range; gpu.model
	// unknown), by attribute and reason.
	StepmetricsAttributesSkipped metric.Int64Counter
	// StepmetricsStepsClosed counts steps folded into the metrics, by how
	// they closed: complete, timeout, evicted, shutdown.
	StepmetricsStepsClosed metric.Int64Counter
}

// Instruments of the connector's own telemetry.
var (
	spansDropped      = telemetry.Instrument{Name: "otelcol_stepmetrics_spans_dropped", Description: "train.step spans not used, by reason.", Unit: "{span}", Stability: component.StabilityLevelDevelopment}
	attributesSkipped = telemetry.Instrument{Name: "otelcol_stepmetrics_attributes_skipped", Description: "Attributes of train.step spans ignored, by attribute and reason.", Unit: "{attribute}", Stability: component.StabilityLevelDevelopment}
	stepsClosed       = telemetry.Instrument{Name: "otelcol_stepmetrics_steps_closed", Description: "Steps folded into the metrics, by how they closed.", Unit: "{step}", Stability: component.StabilityLevelDevelopment}
)

// NewTelemetryBuilder creates the connector's instruments from settings.
func NewTelemetryBuilder(settings component.TelemetrySettings) (*TelemetryBuilder, error) {
	b := telemetry.NewBuilder(settings, ScopeName)
	return &TelemetryBuilder{
		StepmetricsSpansDropped:      b.Int64Counter(spansDropped),
		StepmetricsAttributesSkipped: b.Int64Counter(attributesSkipped),
		StepmetricsStepsClosed:       b.Int64Counter(stepsClosed),
	}, b.Err()
}
