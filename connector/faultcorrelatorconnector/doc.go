// Package faultcorrelator is a connector (ocb registers it under
// `connectors`, type faultcorrelator) from the traces, metrics and logs
// pipelines into a logs pipeline. It strips forged fault.* attributes from
// its input, maps what remains onto per-entity signals of internal/rules,
// evaluates the rules on an interval and emits fault records
// (docs/fault-record.md): open, update, resolved. One instance serves all
// three input pipelines of one config.
package faultcorrelatorconnector // import "github.com/otelcol-gpu/otelcol-gpu/connector/faultcorrelatorconnector"
