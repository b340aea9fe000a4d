// Package steplogsconnector turns the log-record form of training steps
// (docs/training-scripts.md: one record per rank per step with
// iteration.step and duration_ns, for scripts that cannot send spans) into
// train.step spans, so that the stepspan processor treats both alike.
package steplogsconnector // import "github.com/otelcol-gpu/otelcol-gpu/connector/steplogsconnector"
