package metadata // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ibreceiver/internal/metadata"

import (
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/internal/telemetry"
)

// Attribute keys of the receiver's own telemetry.
const (
	// TelemetryAttrDevice is the InfiniBand device of a read error.
	TelemetryAttrDevice = semconv.AttrIBDevice
	// TelemetryAttrCounter is the file of a read error relative to the
	// device directory, e.g. "ports/1/counters/symbol_error".
	TelemetryAttrCounter = "ib.counter"
	// TelemetryAttrReason says why a device was skipped in a scrape:
	// ReasonReadTimeout or ReasonReadPending.
	TelemetryAttrReason = "reason"
)

// Values of TelemetryAttrReason.
const (
	// ReasonReadTimeout: the device's sysfs reads started in this scrape did
	// not finish within read_timeout.
	ReasonReadTimeout = "read_timeout"
	// ReasonReadPending: the device's read from an earlier scrape is still
	// blocked; no second read of it is started.
	ReasonReadPending = "read_pending"
)

// TelemetryBuilder holds the instruments of the receiver's own telemetry.
type TelemetryBuilder struct {
	// IbReadErrors counts counter and state values that could not be read
	// or parsed, including "N/A (no PMA)" values; one per file per scrape.
	IbReadErrors metric.Int64Counter
	// IbDevicesSkipped counts devices left out of a scrape because their
	// sysfs reads did not finish within read_timeout; one per device per
	// scrape.
	IbDevicesSkipped metric.Int64Counter
	// IbFilesUnheld counts sysfs file reads done with open, read and
	// close because the receiver held as many files open as it will.
	IbFilesUnheld metric.Int64Counter
}

// Instruments of the receiver's own telemetry.
var (
	readErrors     = telemetry.Instrument{Name: "otelcol_ib_read_errors", Description: `Number of InfiniBand counter or state values that could not be read or parsed, including "N/A (no PMA)" values.`, Unit: "{error}", Stability: component.StabilityLevelAlpha}
	filesUnheld    = telemetry.Instrument{Name: "otelcol_ib_files_unheld", Description: "Number of sysfs file reads done with open, read and close because the receiver already held as many files open as it will.", Unit: "{read}", Stability: component.StabilityLevelAlpha}
	devicesSkipped = telemetry.Instrument{Name: "otelcol_ib_devices_skipped", Description: "Number of times a device was left out of a scrape because its sysfs reads did not finish within read_timeout.", Unit: "{device}", Stability: component.StabilityLevelAlpha}
)

// NewTelemetryBuilder creates the receiver's instruments from settings.
func NewTelemetryBuilder(settings component.TelemetrySettings) (*TelemetryBuilder, error) {
	b := telemetry.NewBuilder(settings, ScopeName)
	return &TelemetryBuilder{
		IbReadErrors:     b.Int64Counter(readErrors),
		IbDevicesSkipped: b.Int64Counter(devicesSkipped),
		IbFilesUnheld:    b.Int64Counter(filesUnheld),
	}, b.Err()
}

// Shutdown is part of the scraper's lifecycle; the instruments are all
// synchronous, so there is no callback to unregister.
func (*TelemetryBuilder) Shutdown() {}
