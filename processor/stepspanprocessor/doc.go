// Package stepspanprocessor makes one span per rank per training step with
// the contract's ids (docs/training-scripts.md), folds the rank's NCCL
// collectives into it, and keys what it sends by job. See README.md.
package stepspanprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/stepspanprocessor"
