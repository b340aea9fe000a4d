package metadata // import "github.com/otelcol-gpu/otelcol-gpu/extension/nodestateextension/internal/metadata"

import (
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelcol-gpu/otelcol-gpu/internal/telemetry"
)

// Attribute keys of the extension's own telemetry.
const (
	// TelemetryAttrKind is what was evicted: gpu or ib_port.
	TelemetryAttrKind = "kind"
	// TelemetryAttrReason is why: capacity (max_gpus / max_ib_ports
	// reached) or idle (not recorded for the retention).
	TelemetryAttrReason = "reason"
)

// TelemetryBuilder holds the instruments of the extension's own telemetry.
type TelemetryBuilder struct {
	// NodestateEvictions counts GPUs and ports the store forgot.
	NodestateEvictions metric.Int64Counter
}

// Instruments of the extension's own telemetry.
var (
	evictions = telemetry.Instrument{Name: "otelcol_nodestate_evictions", Description: "Number of GPUs and InfiniBand ports the node state store forgot, by kind and reason.", Unit: "{entry}", Stability: component.StabilityLevelAlpha}
)

// NewTelemetryBuilder creates the extension's instruments from settings.
func NewTelemetryBuilder(settings component.TelemetrySettings) (*TelemetryBuilder, error) {
	b := telemetry.NewBuilder(settings, ScopeName)
	return &TelemetryBuilder{
		NodestateEvictions: b.Int64Counter(evictions),
	}, b.Err()
}

// Shutdown is part of the extension's lifecycle; the instruments are all
// synchronous, so there is no callback to unregister.
func (*TelemetryBuilder) Shutdown() {}
