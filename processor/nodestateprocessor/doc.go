// Package nodestateprocessor implements the "nodestate" processor for
// metrics and logs: it records the GPU and InfiniBand health that flows past
// (dcgmreceiver and ibreceiver metrics, gpu.xid log records) into the
// nodestate extension named in its configuration, and passes the data on
// unchanged. The traces pipeline (stepspanprocessor) reads the same
// extension to put a GPU's health during a training step on the rank's span.
package nodestateprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/nodestateprocessor"
