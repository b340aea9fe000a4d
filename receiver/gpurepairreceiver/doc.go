// Package gpurepairreceiver is the agent's repair endpoint (issue 33): what
// only the node can do in the repair loop, on the gateway's signed request.
// It serves the API of internal/repair over HTTP(S): the node's boot id and
// each GPU's busy state, a GPU reset (only of an idle GPU of this node, by
// the configured command), a verification (the requested checks, DCGM
// diagnostics and the link counters steady over a window, through
// verify.Runner once the GPUs are idle), and a confirmation (whether the
// node's own readings in the nodestate extension show a fault, asked before
// the gateway repairs anything). Each request must be signed by the
// gateway's Ed25519 key for this node, fresh and not replayed. Each
// finished job is a gpu.repair.result log record, which goes to Kafka with
// the node's other logs.
package gpurepairreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpurepairreceiver"
