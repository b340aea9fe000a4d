package metadata // import "github.com/otelcol-gpu/otelcol-gpu/connector/faultcorrelatorconnector/internal/metadata"

import (
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelcol-gpu/otelcol-gpu/internal/telemetry"
)

// Instruments of the connector's own telemetry.
var (
	faultsOpen = telemetry.Instrument{Name: "otelcol_faultcorrelator_faults_open", Description: "Faults open now, by fault.type and fault.severity.", Unit: "{fault}", Stability: component.StabilityLevelDevelopment}
)

// NewFaultsOpenGauge creates the faults_open gauge on meter. The connector
// registers its callback: only it knows which faults are open.
func NewFaultsOpenGauge(meter metric.Meter) (metric.Int64ObservableGauge, error) {
	return faultsOpen.Int64ObservableGauge(meter)
}
