// Package nodestateextension implements the "nodestate" extension: an
// in-memory, bounded store of this node's recent GPU and InfiniBand health,
// shared by the pipelines of one collector. nodestateprocessor feeds it from
// the metrics and logs pipelines (dcgmreceiver, ibreceiver, XID records);
// stepspanprocessor reads it from the traces pipeline to put the health of a
// rank's GPU during a step on the rank's span. Components reach it through
// the interface in package nodestate.
package nodestateextension // import "github.com/otelcol-gpu/otelcol-gpu/extension/nodestateextension"
