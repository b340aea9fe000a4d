// Package telemetry creates the instruments of a component's own telemetry
// from declarations, in the shape mdatagen generates: each component's
// internal/metadata declares its instruments (name, description, unit,
// stability) and this package does the rest, so the builders are not copied
// by hand from one component to the next.
package telemetry // import "github.com/otelcol-gpu/otelcol-gpu/internal/telemetry"

import (
	"errors"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/metric"
)

// Instrument declares one instrument of a component's own telemetry.
type Instrument struct {
	// Name is the full instrument name, e.g. otelcol_ib_read_errors.
	Name        string
	Description string
	Unit        string
	// Stability is appended to the description ("... [Alpha]"), as mdatagen
	// does, so users see it in every exporter that shows descriptions.
	Stability component.StabilityLevel
}

// FullDescription is the description as registered: with the stability
// appended when it is known.
func (i Instrument) FullDescription() string {
	if i.Stability == component.StabilityLevelUndefined {
		return i.Description
	}
	return i.Description + " [" + i.Stability.String() + "]"
}

// Int64ObservableGauge creates the gauge on meter; the caller registers its
// callback (it owns the state the callback reads).
func (i Instrument) Int64ObservableGauge(meter metric.Meter) (metric.Int64ObservableGauge, error) {
	return meter.Int64ObservableGauge(i.Name,
		metric.WithDescription(i.FullDescription()), metric.WithUnit(i.Unit))
}

// Builder creates a component's synchronous instruments on the meter of its
// scope and gathers their errors, so a metadata package's
// NewTelemetryBuilder is one line per instrument.
type Builder struct {
	meter metric.Meter
	errs  error
}

// NewBuilder returns a builder for the meter of scope.
func NewBuilder(settings component.TelemetrySettings, scope string) *Builder {
	return &Builder{meter: settings.MeterProvider.Meter(scope)}
}

// Int64Counter creates a counter; an error is kept for Err.
func (b *Builder) Int64Counter(i Instrument) metric.Int64Counter {
	c, err := b.meter.Int64Counter(i.Name,
		metric.WithDescription(i.FullDescription()), metric.WithUnit(i.Unit))
	b.errs = errors.Join(b.errs, err)
	return c
}

// Int64Gauge creates a synchronous gauge; an error is kept for Err.
func (b *Builder) Int64Gauge(i Instrument) metric.Int64Gauge {
	g, err := b.meter.Int64Gauge(i.Name,
		metric.WithDescription(i.FullDescription()), metric.WithUnit(i.Unit))
	b.errs = errors.Join(b.errs, err)
	return g
}

// Err returns the errors of every instrument created so far.
func (b *Builder) Err() error { return b.errs }
