package metadata // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/metadata"

import (
	"go.opentelemetry.io/collector/component"

	"github.com/otelcol-gpu/otelcol-gpu/internal/telemetry"
)

// TelemetryAttrSeverity is a refused or waiting fault's severity (P1..P4,
// the values fault records may carry).
const TelemetryAttrSeverity = "severity"

// The quarantined-share cap's instruments: what it refused, and what waits
// behind it (the state an alert pages on).
var (
	capRefusals = telemetry.Instrument{Name: "otelcol_remediation_quarantine_cap_refusals",
		Description: "Quarantines refused by max_quarantined_fraction, by platform and fault severity.",
		Unit:        "{decision}", Stability: component.StabilityLevelDevelopment}
	capWaiting = telemetry.Instrument{Name: "otelcol_remediation_quarantine_cap_waiting",
		Description: "Faults the quarantine cap refused that are not yet acted on, by platform and fault severity.",
		Unit:        "{fault}", Stability: component.StabilityLevelDevelopment}
)
