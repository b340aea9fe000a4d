package metadata // import "github.com/otelcol-gpu/otelcol-gpu/connector/faultcorrelatorconnector/internal/metadata"

import (
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelcol-gpu/otelcol-gpu/internal/telemetry"
)

// TelemetryAttrCap is the attribute of the refused and evicted counters:
// the cap that was full (max_open_faults, max_open_faults_per_node or
// max_open_faults_per_source).
const TelemetryAttrCap = "cap"

// Instruments of the connector's own telemetry.
var (
	faultsOpen    = telemetry.Instrument{Name: "otelcol_faultcorrelator_faults_open", Description: "Faults open now, by fault.type and fault.severity.", Unit: "{fault}", Stability: component.StabilityLevelDevelopment}
	faultsRefused = telemetry.Instrument{Name: "otelcol_faultcorrelator_faults_refused", Description: "Faults not opened because a cap on open faults was full of faults at least as severe, by cap.", Unit: "{fault}", Stability: component.StabilityLevelDevelopment}
	faultsEvicted = telemetry.Instrument{Name: "otelcol_faultcorrelator_faults_evicted", Description: "Open faults no longer tracked to make room for a more severe fault, by cap.", Unit: "{fault}", Stability: component.StabilityLevelDevelopment}
)

// NewFaultsOpenGauge creates the faults_open gauge on meter. The connector
// registers its callback: only it knows which faults are open.
func NewFaultsOpenGauge(meter metric.Meter) (metric.Int64ObservableGauge, error) {
	return faultsOpen.Int64ObservableGauge(meter)
}

// TelemetryBuilder holds the connector's synchronous instruments.
type TelemetryBuilder struct {
	// FaultcorrelatorFaultsRefused counts faults not opened, by the cap
	// that was full.
	FaultcorrelatorFaultsRefused metric.Int64Counter
	// FaultcorrelatorFaultsEvicted counts open faults dropped for a more
	// severe one, by the cap that was full.
	FaultcorrelatorFaultsEvicted metric.Int64Counter
}

// NewTelemetryBuilder creates the connector's counters from settings.
func NewTelemetryBuilder(settings component.TelemetrySettings) (*TelemetryBuilder, error) {
	b := telemetry.NewBuilder(settings, ScopeName)
	return &TelemetryBuilder{
		FaultcorrelatorFaultsRefused: b.Int64Counter(faultsRefused),
		FaultcorrelatorFaultsEvicted: b.Int64Counter(faultsEvicted),
	}, b.Err()
}
