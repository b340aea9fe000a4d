package metadata // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpufaultsreceiver/internal/metadata"

import (
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelcol-gpu/otelcol-gpu/internal/telemetry"
)

// Attribute keys and values of the receiver's own telemetry.
const (
	// TelemetryAttrReason says why a record was refused.
	TelemetryAttrReason = "reason"
	// ReasonUndecodable: the record's value is not OTLP protobuf logs.
	ReasonUndecodable = "undecodable"
	// ReasonPermanent: the next consumer returned a permanent error.
	ReasonPermanent = "permanent"
)

// TelemetryBuilder holds the instruments of the receiver's own telemetry.
type TelemetryBuilder struct {
	// GpuFaultsRecordsDelivered counts Kafka records the next consumer
	// accepted (and whose offsets were then committed).
	GpuFaultsRecordsDelivered metric.Int64Counter
	// GpuFaultsRecordsRefused counts records committed without delivery:
	// undecodable, or refused by the next consumer with a permanent error.
	GpuFaultsRecordsRefused metric.Int64Counter
	// GpuFaultsPartitionsOwned is how many gpu_faults partitions this member
	// owns: all of them on the owner, 0 on a standby.
	GpuFaultsPartitionsOwned metric.Int64Gauge
	// GpuFaultsRebalances counts the group generations this member joined.
	GpuFaultsRebalances metric.Int64Counter
}

// Instruments of the receiver's own telemetry.
var (
	recordsDelivered = telemetry.Instrument{Name: "otelcol_gpu_faults_records_delivered", Description: "Number of gpu_faults Kafka records the next consumer accepted and whose offsets were committed.", Unit: "{record}", Stability: component.StabilityLevelAlpha}
	recordsRefused   = telemetry.Instrument{Name: "otelcol_gpu_faults_records_refused", Description: "Number of gpu_faults Kafka records committed without delivery: undecodable, or refused with a permanent error.", Unit: "{record}", Stability: component.StabilityLevelAlpha}
	partitionsOwned  = telemetry.Instrument{Name: "otelcol_gpu_faults_partitions_owned", Description: "Number of gpu_faults partitions this member owns: all of them on the single owner, 0 on a standby.", Unit: "{partition}", Stability: component.StabilityLevelAlpha}
	rebalances       = telemetry.Instrument{Name: "otelcol_gpu_faults_rebalances", Description: "Number of consumer group generations this member joined.", Unit: "{rebalance}", Stability: component.StabilityLevelAlpha}
)

// NewTelemetryBuilder creates the receiver's instruments from settings.
func NewTelemetryBuilder(settings component.TelemetrySettings) (*TelemetryBuilder, error) {
	b := telemetry.NewBuilder(settings, ScopeName)
	return &TelemetryBuilder{
		GpuFaultsRecordsDelivered: b.Int64Counter(recordsDelivered),
		GpuFaultsRecordsRefused:   b.Int64Counter(recordsRefused),
		GpuFaultsPartitionsOwned:  b.Int64Gauge(partitionsOwned),
		GpuFaultsRebalances:       b.Int64Counter(rebalances),
	}, b.Err()
}

// Shutdown is part of the receiver's lifecycle; the instruments are all
// synchronous, so there is no callback to unregister.
func (*TelemetryBuilder) Shutdown() {}
