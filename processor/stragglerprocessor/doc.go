// Package stragglerprocessor finds the slow rank of a training job on the
// gateway: it passes every rank's step span on at once, keeping a compact
// record of its signals per open step, scores each rank's own compute time
// against its pipeline stage (internal/straggler), and emits the step's root
// span with the contract's ids and a train.step.verdict span for every rank
// with a verdict. See README.md.
package stragglerprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/stragglerprocessor"
