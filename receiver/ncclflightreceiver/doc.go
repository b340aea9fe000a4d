// Package ncclflightreceiver turns NCCL collectives into spans, metrics and
// findings: PyTorch flight recorder dumps (pickle or JSON, read safely),
// NCCL inspector plugin files (tailed), and NCCL RAS status. The dumps of
// all ranks present are analysed together for hangs, mismatches, a
// straggler and process-group divergence. See README.md.
package ncclflightreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver"
