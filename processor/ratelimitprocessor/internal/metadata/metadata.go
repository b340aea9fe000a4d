// Package metadata holds the identity of the rate limit processor (type,
// scope name, stability) and the declarations of its internal telemetry,
// written by hand in the shape mdatagen produces. metadata.yaml next to the
// processor documents the same facts; metadata_conformance_test.go there
// checks that they agree.
package metadata // import "github.com/otelcol-gpu/otelcol-gpu/processor/ratelimitprocessor/internal/metadata"

import (
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelcol-gpu/otelcol-gpu/internal/telemetry"
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
	// key's (or their node's) bucket was empty.
	DroppedItems metric.Int64Counter
	// ProtectedItems counts spans and log records passed because they are
	// protected: trusted ones (hardware signals, fault.* attributes)
	// uncharged, the others (error or slow spans; warnings, errors,
	// protected scopes, step records) charged and dropped last.
	ProtectedItems metric.Int64Counter
	// EvictedKeys counts buckets evicted (least recently used) because
	// max_keys was reached.
	EvictedKeys metric.Int64Counter
}

// Instruments of the processor's own telemetry.
var (
	droppedItems   = telemetry.Instrument{Name: "otelcol_processor_ratelimit_dropped_items", Description: "Spans and log records dropped because their key was over budget (signal, key).", Unit: "{item}", Stability: component.StabilityLevelDevelopment}
	protectedItems = telemetry.Instrument{Name: "otelcol_processor_ratelimit_protected_items", Description: "Spans and log records passed because they are protected: trusted ones uncharged, the others charged and dropped last (signal).", Unit: "{item}", Stability: component.StabilityLevelDevelopment}
	evictedKeys    = telemetry.Instrument{Name: "otelcol_processor_ratelimit_evicted_keys", Description: "Buckets evicted, least recently used first, because max_keys was reached (signal).", Unit: "{key}", Stability: component.StabilityLevelDevelopment}
)

// NewTelemetryBuilder creates the processor's instruments from settings.
func NewTelemetryBuilder(settings component.TelemetrySettings) (*TelemetryBuilder, error) {
	b := telemetry.NewBuilder(settings, ScopeName)
	return &TelemetryBuilder{
		DroppedItems:   b.Int64Counter(droppedItems),
		ProtectedItems: b.Int64Counter(protectedItems),
		EvictedKeys:    b.Int64Counter(evictedKeys),
	}, b.Err()
}
