// Package metadata holds the identity of the ncclflight receiver (type,
// scope name, stability) and the declarations of its internal telemetry,
// written by hand in the shape mdatagen produces. metadata.yaml next to the
// receiver documents the same facts; metadata_conformance_test.go there
// checks that they agree.
package metadata // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/metadata"

import (
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/internal/telemetry"
)

var (
	// Type is the component type of the receiver: "ncclflight".
	Type = component.MustNewType("ncclflight")
	// ScopeName is the instrumentation scope of what the receiver emits.
	ScopeName = semconv.ScopeNCCLFlightReceiver
)

const (
	TracesStability  = component.StabilityLevelAlpha
	MetricsStability = component.StabilityLevelAlpha
	LogsStability    = component.StabilityLevelAlpha
)

// TelemetryAttrInput is the input a failure came from: flight_recorder,
// inspector or ras.
const TelemetryAttrInput = "input"

// TelemetryAttrReason says why an input was refused: "symlink" or
// "not_regular" for a file refused without being read (a FIFO, device,
// socket or directory under an input's name; see internal/safefile);
// too_large, unreadable, undecodable, over_budget (over the dump's own
// memory budget or entry cap), over_decode_budget (over what the
// receiver's decode budget has free), poisoned (the previous run died
// reading the batch that holds it), unavailable (RAS) or no_pattern_match
// (a dump directory whose files match none of flight_recorder::patterns).
const TelemetryAttrReason = "reason"

// TelemetryBuilder holds the instruments of the receiver's own telemetry.
type TelemetryBuilder struct {
	// NcclflightBadInputs counts files, lines and replies refused (corrupt,
	// over the size cap, poisoned, unreachable), by input and reason.
	NcclflightBadInputs metric.Int64Counter
	// NcclflightDumpsRead counts flight recorder dumps decoded.
	NcclflightDumpsRead metric.Int64Counter
}

// Instruments of the receiver's own telemetry.
var (
	badInputs = telemetry.Instrument{Name: "otelcol_ncclflight_bad_inputs", Description: "Dumps, inspector lines and RAS replies refused, by input and reason.", Unit: "{input}", Stability: component.StabilityLevelAlpha}
	dumpsRead = telemetry.Instrument{Name: "otelcol_ncclflight_dumps_read", Description: "Flight recorder dumps decoded.", Unit: "{dump}", Stability: component.StabilityLevelAlpha}
)

// NewTelemetryBuilder creates the receiver's instruments from settings.
func NewTelemetryBuilder(settings component.TelemetrySettings) (*TelemetryBuilder, error) {
	b := telemetry.NewBuilder(settings, ScopeName)
	return &TelemetryBuilder{
		NcclflightBadInputs: b.Int64Counter(badInputs),
		NcclflightDumpsRead: b.Int64Counter(dumpsRead),
	}, b.Err()
}
