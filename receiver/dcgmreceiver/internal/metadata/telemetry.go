package metadata // import "github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/metadata"

import (
	"errors"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/metric"
)

// Attribute keys of the receiver's own telemetry.
const (
	// TelemetryAttrSource is the source a failure came from: dcgm, nvml,
	// exporter, kmsg or attribution.
	TelemetryAttrSource = "source"
)

// TelemetryBuilder holds the instruments of the receiver's own telemetry.
type TelemetryBuilder struct {
	// DcgmCollectErrors counts collections that failed as a whole.
	DcgmCollectErrors metric.Int64Counter
	// DcgmSourceUp is 1 while the source is connected, 0 while it is retried.
	DcgmSourceUp metric.Int64Gauge
	// DcgmXidEventsDropped counts XID events dropped because the logs
	// pipeline did not keep up (the buffer was full).
	DcgmXidEventsDropped metric.Int64Counter
}

// NewTelemetryBuilder creates the receiver's instruments from settings.
func NewTelemetryBuilder(settings component.TelemetrySettings) (*TelemetryBuilder, error) {
	meter := settings.MeterProvider.Meter(ScopeName)
	var b TelemetryBuilder
	var err, errs error
	b.DcgmCollectErrors, err = meter.Int64Counter("otelcol_dcgm_collect_errors",
		metric.WithDescription("Collections of GPU fields that failed as a whole. [Alpha]"),
		metric.WithUnit("{error}"))
	errs = errors.Join(errs, err)
	b.DcgmSourceUp, err = meter.Int64Gauge("otelcol_dcgm_source_up",
		metric.WithDescription("1 while the GPU source is connected, 0 while it is being retried. [Alpha]"),
		metric.WithUnit("1"))
	errs = errors.Join(errs, err)
	b.DcgmXidEventsDropped, err = meter.Int64Counter("otelcol_dcgm_xid_events_dropped",
		metric.WithDescription("XID events dropped because the logs pipeline did not keep up. [Alpha]"),
		metric.WithUnit("{event}"))
	errs = errors.Join(errs, err)
	return &b, errs
}
