// Package decisionlog is the remediation exporter's durable decision log:
// a Kafka topic every replica reads from its beginning into an in-memory
// set of decided keys, and the replica that decides a record appends to
// (acks=all, idempotent producer) before it audits the decision locally.
//
// CatchUp reads the topic up to the high watermarks it asks for (one
// ListOffsets round trip when already current), so a decision published by
// any replica before the call is seen. The set is bounded: keys older than
// the retention are dropped, and past MaxKeys the oldest are evicted and
// counted.
package decisionlog // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/decisionlog"
