package metadata // import "github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/metadata"

import (
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelcol-gpu/otelcol-gpu/internal/telemetry"
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
	// DcgmForeignSamples counts samples refused because they speak for
	// another node (a dcgm-exporter page's Hostname label).
	DcgmForeignSamples metric.Int64Counter
}

// Instruments of the receiver's own telemetry.
var (
	collectErrors    = telemetry.Instrument{Name: "otelcol_dcgm_collect_errors", Description: "Collections of GPU fields that failed as a whole.", Unit: "{error}", Stability: component.StabilityLevelAlpha}
	sourceUp         = telemetry.Instrument{Name: "otelcol_dcgm_source_up", Description: "1 while the GPU source is connected, 0 while it is being retried.", Unit: "1", Stability: component.StabilityLevelAlpha}
	foreignSamples   = telemetry.Instrument{Name: "otelcol_dcgm_foreign_samples", Description: "GPU samples refused because they speak for another node.", Unit: "{sample}", Stability: component.StabilityLevelAlpha}
	xidEventsDropped = telemetry.Instrument{Name: "otelcol_dcgm_xid_events_dropped", Description: "XID events dropped because the logs pipeline did not keep up.", Unit: "{event}", Stability: component.StabilityLevelAlpha}
)

// NewTelemetryBuilder creates the receiver's instruments from settings.
func NewTelemetryBuilder(settings component.TelemetrySettings) (*TelemetryBuilder, error) {
	b := telemetry.NewBuilder(settings, ScopeName)
	return &TelemetryBuilder{
		DcgmCollectErrors:    b.Int64Counter(collectErrors),
		DcgmSourceUp:         b.Int64Gauge(sourceUp),
		DcgmXidEventsDropped: b.Int64Counter(xidEventsDropped),
		DcgmForeignSamples:   b.Int64Counter(foreignSamples),
	}, b.Err()
}
