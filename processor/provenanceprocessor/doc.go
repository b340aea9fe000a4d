// Package provenanceprocessor makes an agent speak only for its own node.
// It runs on what the agent receives over OTLP, never on what its own
// receivers produce, and renames under "forged." every claim that only
// the node's own receivers may make:
//
//   - host.name: the agent's own name is stamped on every resource; a
//     sender's differing claim survives only as forged.host.name, so what a
//     script sends can implicate no other node;
//   - gpu.uuid and gpu.index not in the node's GPU inventory (the GPUs its
//     GPU receiver reported, from the nodestate extension; none before the
//     first scrape: fail closed);
//   - hardware signals (semconv.HardwareSignal): the metric names and
//     attributes of the GPU, InfiniBand and NCCL receivers, which no rule
//     may read from a sender;
//   - fault.* attributes (internal/fault.StripForged*).
//
// Renaming rather than dropping keeps what a sender claimed visible for an
// audit, and no consumer reads forged.* names.
package provenanceprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/provenanceprocessor"
