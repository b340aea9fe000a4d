// Package faultcorrelator is a connector (ocb registers it under
// `connectors`, type faultcorrelator) from the traces, metrics and logs
// pipelines into a logs pipeline. It strips forged fault.* attributes from
// its input, maps what remains onto per-entity signals of internal/rules,
// evaluates the rules on an interval and for each input, and emits fault
// records (docs/fault-record.md): open, update, resolved. A consume call
// returns once the records its input caused were accepted downstream
// (handoff.go). One instance serves all three input pipelines of one
// config.
package faultcorrelatorconnector // import "github.com/otelcol-gpu/otelcol-gpu/connector/faultcorrelatorconnector"
