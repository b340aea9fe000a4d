package semconv

// Kafka topics and consumer groups that more than one component (and the
// deployment configs) name.
const (
	// TopicFaults holds the fault records the correlator writes (OTLP
	// protobuf logs, docs/fault-record.md); the remediation pipeline reads it.
	TopicFaults = "gpu_faults"
	// GroupRemediation is the consumer group of the gpu_faults receiver that
	// feeds the remediation exporter: one member owns every partition.
	GroupRemediation = "otelcol-gpu-remediation"
)

// client.Info metadata keys (go.opentelemetry.io/collector/client) under
// which the gpu_faults receiver passes where a record came from. Each holds
// one value, in decimal for the numbers. The remediation exporter writes
// them into its decision log, so that a decision names the record it acted
// on.
const (
	MetadataKafkaTopic     = "kafka.topic"
	MetadataKafkaPartition = "kafka.partition"
	MetadataKafkaOffset    = "kafka.offset"
)
