// Package metadata holds the identity of the ncclflight receiver (type,
// scope name, stability) and its internal telemetry. It is written by hand
// in the shape that mdatagen produces for contrib components; metadata.yaml
// next to the receiver documents the same facts.
package metadata // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/metadata"

import (
	"errors"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/metric"
)

var (
	// Type is the component type of the receiver: "ncclflight".
	Type = component.MustNewType("ncclflight")
	// ScopeName is the instrumentation scope of what the receiver emits.
	ScopeName = "github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver"
)

const (
	TracesStability  = component.StabilityLevelAlpha
	MetricsStability = component.StabilityLevelAlpha
	LogsStability    = component.StabilityLevelAlpha
)

// TelemetryAttrInput is the input a failure came from: flight_recorder,
// inspector or ras.
const TelemetryAttrInput = "input"

// TelemetryBuilder holds the instruments of the receiver's own telemetry.
type TelemetryBuilder struct {
	// NcclflightBadInputs counts files, lines and replies that could not be
	// decoded (corrupt, refused, over the size cap).
	NcclflightBadInputs metric.Int64Counter
	// NcclflightDumpsRead counts flight recorder dumps decoded.
	NcclflightDumpsRead metric.Int64Counter
}

// NewTelemetryBuilder creates the receiver's instruments from settings.
func NewTelemetryBuilder(settings component.TelemetrySettings) (*TelemetryBuilder, error) {
	meter := settings.MeterProvider.Meter(ScopeName)
	var b TelemetryBuilder
	var err, errs error
	b.NcclflightBadInputs, err = meter.Int64Counter("otelcol_ncclflight_bad_inputs",
		metric.WithDescription("Dumps, inspector lines and RAS replies that could not be decoded. [Alpha]"),
		metric.WithUnit("{input}"))
	errs = errors.Join(errs, err)
	b.NcclflightDumpsRead, err = meter.Int64Counter("otelcol_ncclflight_dumps_read",
		metric.WithDescription("Flight recorder dumps decoded. [Alpha]"),
		metric.WithUnit("{dump}"))
	errs = errors.Join(errs, err)
	return &b, errs
}
