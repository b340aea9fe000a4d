// Package metadata holds the identity of the rate limit processor (type,
// scope name, stability) and its internal telemetry, written by hand in the
// shape mdatagen produces; metadata.yaml documents the same.
package metadata // import "github.com/otelcol-gpu/otelcol-gpu/processor/ratelimitprocessor/internal/metadata"

import (
	"errors"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/metric"
)

var (
	// Type is the component type: "ratelimit".
	Type = component.MustNewType("ratelimit")
	// ScopeName is the scope of the processor's telemetry.
	ScopeName = "github.com/otelcol-gpu/otelcol-gpu/processor/ratelimitprocessor"
)

// Stability of each signal.
const (
	TracesStability  = component.StabilityLevelDevelopment
	LogsStability    = component.StabilityLevelDevelopment
	MetricsStability = component.StabilityLevelDevelopment
)

// Attributes of the processor's telemetry.
const (
	// TelemetryAttrSignal is traces or logs.
	TelemetryAttrSignal = "signal"
	// TelemetryAttrKey is the bucket's key value (a job id, a host name; ""
	// for items without one). It appears only on dropped_items, so only
	// keys that went over budget ever become series.
	TelemetryAttrKey = "key"
)

// TelemetryBuilder holds the instruments of the processor's own telemetry.
type TelemetryBuilder struct {
	// DroppedItems counts spans and log records dropped because their
	// key's bucket was empty.
	DroppedItems metric.Int64Counter
	// ProtectedItems counts spans and log records passed without being
	// charged to any bucket because they are protected (error or slow
	// spans; warnings, errors, XID, NCCL and fault records).
	ProtectedItems metric.Int64Counter
	// EvictedKeys counts buckets evicted (least recently used) because
	// max_keys was reached.
	EvictedKeys metric.Int64Counter
}

// NewTelemetryBuilder creates the processor's instruments from settings.
func NewTelemetryBuilder(settings component.TelemetrySettings) (*TelemetryBuilder, error) {
	meter := settings.MeterProvider.Meter(ScopeName)
	var b TelemetryBuilder
	var err, errs error
	b.DroppedItems, err = meter.Int64Counter("otelcol_processor_ratelimit_dropped_items",
		metric.WithDescription("Spans and log records dropped because their key was over budget (signal, key). [Development]"),
		metric.WithUnit("{item}"))
	errs = errors.Join(errs, err)
	b.ProtectedItems, err = meter.Int64Counter("otelcol_processor_ratelimit_protected_items",
		metric.WithDescription("Spans and log records passed uncharged because they are protected (signal). [Development]"),
		metric.WithUnit("{item}"))
	errs = errors.Join(errs, err)
	b.EvictedKeys, err = meter.Int64Counter("otelcol_processor_ratelimit_evicted_keys",
		metric.WithDescription("Buckets evicted, least recently used first, because max_keys was reached (signal). [Development]"),
		metric.WithUnit("{key}"))
	errs = errors.Join(errs, err)
	return &b, errs
}
