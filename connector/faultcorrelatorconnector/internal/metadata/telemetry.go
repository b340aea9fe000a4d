package metadata // import "github.com/otelcol-gpu/otelcol-gpu/connector/faultcorrelatorconnector/internal/metadata"

import (
	"errors"

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
	verdictLag    = telemetry.Instrument{Name: "otelcol_faultcorrelator_verdict_lag_seconds", Description: "Arrival at the correlator minus the end of each straggler verdict span (train.step.verdict); a negative lag (the node's clock ahead) is recorded as 0.", Unit: "s", Stability: component.StabilityLevelDevelopment}
	rankRefused   = telemetry.Instrument{Name: "otelcol_faultcorrelator_finding_ranks_refused", Description: "Ranks a flight-recorder finding named but that are known to run on another node than the reporting agent's; not attributed.", Unit: "{rank}", Stability: component.StabilityLevelDevelopment}
	clockAhead    = telemetry.Instrument{Name: "otelcol_faultcorrelator_verdict_clock_ahead", Description: "Straggler verdict spans that ended after they arrived (the sending node's clock ahead of the gateway's), recorded as lag 0.", Unit: "{verdict}", Stability: component.StabilityLevelDevelopment}
)

// VerdictLagBuckets are the bounds of the verdict lag histogram, seconds:
// fine below the straggler rules' 2-minute window, coarse up to the hour a
// consumer may lag after a long outage.
var VerdictLagBuckets = []float64{0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}

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
	// FaultcorrelatorVerdictLagSeconds is the lag of each verdict span:
	// arrival minus its end, 0 when negative.
	FaultcorrelatorVerdictLagSeconds metric.Float64Histogram
	// FaultcorrelatorVerdictClockAhead counts the verdict spans whose
	// lag was negative.
	FaultcorrelatorVerdictClockAhead metric.Int64Counter
	// FaultcorrelatorFindingRanksRefused counts ranks a finding named that
	// run on another node than the reporter's.
	FaultcorrelatorFindingRanksRefused metric.Int64Counter
}

// NewTelemetryBuilder creates the connector's counters from settings.
func NewTelemetryBuilder(settings component.TelemetrySettings) (*TelemetryBuilder, error) {
	b := telemetry.NewBuilder(settings, ScopeName)
	tb := &TelemetryBuilder{
		FaultcorrelatorFaultsRefused:       b.Int64Counter(faultsRefused),
		FaultcorrelatorFaultsEvicted:       b.Int64Counter(faultsEvicted),
		FaultcorrelatorVerdictClockAhead:   b.Int64Counter(clockAhead),
		FaultcorrelatorFindingRanksRefused: b.Int64Counter(rankRefused),
	}
	// internal/telemetry has no histogram helper (it is shared, and this
	// is its only histogram): created here with the same description rule.
	var err error
	tb.FaultcorrelatorVerdictLagSeconds, err = settings.MeterProvider.Meter(ScopeName).Float64Histogram(verdictLag.Name,
		metric.WithDescription(verdictLag.FullDescription()), metric.WithUnit(verdictLag.Unit),
		metric.WithExplicitBucketBoundaries(VerdictLagBuckets...))
	return tb, errors.Join(b.Err(), err)
}
