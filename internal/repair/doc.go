// Package repair holds the names the repair loop shares across component
// boundaries (issue 33): the lifecycle steps a quarantined node moves
// through, the repair actions, the verification checks and the agent's
// repair API (types, signatures, client). The remediation exporter (the
// gateway) decides and drives the loop; the agent's repair endpoint carries
// out what only the node can do (reset an idle GPU, run DCGM diagnostics,
// watch its link counters); the console and otelcol-gpu-ctl show where each
// node is. docs/fault-record.md ("The repair loop") describes the loop.
package repair // import "github.com/otelcol-gpu/otelcol-gpu/internal/repair"
