// Package stepmetricsconnector derives per-job training metrics from the
// rank step spans (train.step, docs/training-scripts.md): a step duration
// histogram, tokens/s, the data-load share of the step and MFU. It runs
// where every rank of a job arrives (the gateway, behind Kafka keyed by
// job). See README.md for the formulas and the cardinality budget.
package stepmetricsconnector // import "github.com/otelcol-gpu/otelcol-gpu/connector/stepmetricsconnector"
