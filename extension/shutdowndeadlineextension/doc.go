// Package shutdowndeadlineextension implements the "shutdown_deadline"
// extension: a bound on the whole collector's shutdown, under every
// component. The collector's service calls NotReady at the start of its
// shutdown (SIGTERM, a config reload, a fatal error), before any pipeline
// stops; from then, if the process has not finished shutting down within
// the deadline, the extension logs an error naming the deadline with a
// bounded summary of the goroutines still running (which component held
// the shutdown), flushes the logger and exits the process with status 124.
// Its own Shutdown, after the pipelines', disarms it.
//
// It is the guarantee behind the per-component bounds of
// docs/architecture.md ("Shutdown"): what a component cannot bound itself
// (an in-memory exporter queue drained one attempt per request against a
// backend that accepts connections and never answers) ends at the deadline
// instead of at the kubelet's SIGKILL, and says why. What is lost is what
// in-memory queues and processors still held; persistent queues stay on
// disk for the next start.
package shutdowndeadlineextension // import "github.com/otelcol-gpu/otelcol-gpu/extension/shutdowndeadlineextension"
