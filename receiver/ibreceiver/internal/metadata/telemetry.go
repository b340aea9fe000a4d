package metadata // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ibreceiver/internal/metadata"

import (
	"errors"
	"sync"

	"go.opentelemetry.io/otel/metric"

	"go.opentelemetry.io/collector/component"
)

// Attribute keys of the receiver's own telemetry.
const (
	// TelemetryAttrDevice is the InfiniBand device of a read error.
	TelemetryAttrDevice = "ib.device"
	// TelemetryAttrCounter is the file of a read error relative to the
	// device directory, e.g. "ports/1/counters/symbol_error".
	TelemetryAttrCounter = "ib.counter"
)

// Meter returns the meter of the receiver's own telemetry.
func Meter(settings component.TelemetrySettings) metric.Meter {
	return settings.MeterProvider.Meter(ScopeName)
}

// TelemetryBuilder holds the instruments of the receiver's own telemetry.
type TelemetryBuilder struct {
	meter         metric.Meter
	mu            sync.Mutex
	registrations []metric.Registration
	// IbReadErrors counts counter and state values that could not be read
	// or parsed, including "N/A (no PMA)" values; one per file per scrape.
	IbReadErrors metric.Int64Counter
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

// NewTelemetryBuilder creates the receiver's instruments from settings.
func NewTelemetryBuilder(settings component.TelemetrySettings, options ...TelemetryBuilderOption) (*TelemetryBuilder, error) {
	builder := TelemetryBuilder{}
	for _, op := range options {
		op.apply(&builder)
	}
	builder.meter = Meter(settings)
	var err, errs error
	builder.IbReadErrors, err = builder.meter.Int64Counter(
		"otelcol_ib_read_errors",
		metric.WithDescription("Number of InfiniBand counter or state values that could not be read or parsed, including \"N/A (no PMA)\" values. [Alpha]"),
		metric.WithUnit("{error}"),
	)
	errs = errors.Join(errs, err)
	return &builder, errs
}
