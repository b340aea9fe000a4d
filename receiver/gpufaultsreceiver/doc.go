// Package gpufaultsreceiver reads the fault records on the gpu_faults Kafka
// topic (OTLP protobuf logs, docs/fault-record.md) for the remediation
// exporter.
//
// Every gateway replica runs it in one consumer group whose balancer gives
// every partition to a single member: that member is the only one whose
// remediation exporter sees faults, the others are hot standbys. A record is
// handed to the next consumer with its topic, partition and offset in the
// context's client.Info metadata (internal/semconv), and its offset is
// committed synchronously once the consumer returned nil, before the next
// record of its partition. A retryable error retries the same record; a
// permanent error or an undecodable record is logged, counted, committed and
// passed. When the owner leaves, another member takes every partition and
// resumes at the committed offsets: a record can be delivered again (the
// owner was killed after acting and before committing), never skipped.
package gpufaultsreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpufaultsreceiver"
