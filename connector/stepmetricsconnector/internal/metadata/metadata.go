// Package metadata holds the identity of the stepmetrics connector (type,
// scope name, stability) and its internal telemetry, written by hand in the
// shape mdatagen produces; metadata.yaml next to the connector documents the
// same facts.
package metadata // import "github.com/otelcol-gpu/otelcol-gpu/connector/stepmetricsconnector/internal/metadata"

import (
	"errors"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/metric"
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

// NewTelemetryBuilder creates the connector's instruments from settings.
func NewTelemetryBuilder(settings component.TelemetrySettings) (*TelemetryBuilder, error) {
	meter := settings.MeterProvider.Meter(ScopeName)
	var b TelemetryBuilder
	var err, errs error
	b.StepmetricsSpansDropped, err = meter.Int64Counter("otelcol_stepmetrics_spans_dropped",
		metric.WithDescription("train.step spans not used, by reason. [Development]"),
		metric.WithUnit("{span}"))
	errs = errors.Join(errs, err)
	b.StepmetricsAttributesSkipped, err = meter.Int64Counter("otelcol_stepmetrics_attributes_skipped",
		metric.WithDescription("Attributes of train.step spans ignored, by attribute and reason. [Development]"),
		metric.WithUnit("{attribute}"))
	errs = errors.Join(errs, err)
	b.StepmetricsStepsClosed, err = meter.Int64Counter("otelcol_stepmetrics_steps_closed",
		metric.WithDescription("Steps folded into the metrics, by how they closed. [Development]"),
		metric.WithUnit("{step}"))
	errs = errors.Join(errs, err)
	return &b, errs
}
