package metadata // import "github.com/otelcol-gpu/otelcol-gpu/extension/nodestateextension/internal/metadata"

import (
	"errors"
	"sync"

	"go.opentelemetry.io/otel/metric"

	"go.opentelemetry.io/collector/component"
)

// Attribute keys of the extension's own telemetry.
const (
	// TelemetryAttrKind is what was evicted: gpu or ib_port.
	TelemetryAttrKind = "kind"
	// TelemetryAttrReason is why: capacity (max_gpus / max_ib_ports
	// reached) or idle (not recorded for the retention).
	TelemetryAttrReason = "reason"
)

// Meter returns the meter of the extension's own telemetry.
func Meter(settings component.TelemetrySettings) metric.Meter {
	return settings.MeterProvider.Meter(ScopeName)
}

// TelemetryBuilder holds the instruments of the extension's own telemetry.
type TelemetryBuilder struct {
	meter         metric.Meter
	mu            sync.Mutex
	registrations []metric.Registration
	// NodestateEvictions counts GPUs and ports the store forgot.
	NodestateEvictions metric.Int64Counter
}

// TelemetryBuilderOption applies changes to the default builder.
type TelemetryBuilderOption interface {
	apply(*TelemetryBuilder)
}

type telemetryBuilderOptionFunc func(mb *TelemetryBuilder)

func (tbof telemetryBuilderOptionFunc) apply(mb *TelemetryBuilder) {
	tbof(mb)
}

// Shutdown unregisters all registered callbacks for async instruments.
func (builder *TelemetryBuilder) Shutdown() {
	builder.mu.Lock()
	defer builder.mu.Unlock()
	for _, reg := range builder.registrations {
		reg.Unregister()
	}
	builder.registrations = nil
}

// NewTelemetryBuilder creates the extension's instruments from settings.
func NewTelemetryBuilder(settings component.TelemetrySettings, options ...TelemetryBuilderOption) (*TelemetryBuilder, error) {
	builder := TelemetryBuilder{}
	for _, op := range options {
		op.apply(&builder)
	}
	builder.meter = Meter(settings)
	var err, errs error
	builder.NodestateEvictions, err = builder.meter.Int64Counter(
		"otelcol_nodestate_evictions",
		metric.WithDescription("Number of GPUs and InfiniBand ports the node state store forgot, by kind and reason. [Alpha]"),
		metric.WithUnit("{entry}"),
	)
	errs = errors.Join(errs, err)
	return &builder, errs
}
