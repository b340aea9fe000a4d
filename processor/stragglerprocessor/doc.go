// Package stragglerprocessor finds the slow rank of a training job on the
// gateway: it gathers every rank's step span of a step, scores each rank's
// own compute time against its pipeline stage (internal/straggler),
// annotates the rank spans with the score and verdict, and emits the step's
// root span with the contract's ids. See README.md.
package stragglerprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/stragglerprocessor"
