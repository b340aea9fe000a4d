// Package invariant holds the trust invariant of issue 29 as a property
// and a fuzz target, not as examples: requests built from a grammar of
// what an OTLP sender can put on the wire (repeated keys at every level,
// every metric kind, bodies as maps, span events and links, case and
// Unicode look-alikes of hardware signal names and keys, missing and
// repeated resources, claims of another node's host.name, gpu.uuid and
// event names) go through the agent's OTLP pipelines, built in process
// from the real factories and the configs of distributions/agent, then,
// as the Kafka topics carry them, through the gateway's traces pipeline
// (rate limit, straggler) and its fault correlator (gateway mode, the
// configs of distributions/gateway). Whatever the request:
//
//   - no fault record names a node but the agent's own, or a GPU outside
//     its inventory;
//   - nothing a sender said leaves the provenance processor with a
//     hardware signal's name (a metric name, an attribute key, an event
//     name) anywhere but under forged.;
//   - every record the agent refuses is counted
//     (otelcol_processor_provenance_rejected_claims), and a request is
//     refused with a permanent error exactly when a resource's map is not
//     in canonical form.
//
// TestInvariant runs it over seeded cases in make test; FuzzInvariant
// lets go test -fuzz search (make fuzz-invariant). The tests are the
// package; this file only documents it.
package invariant
