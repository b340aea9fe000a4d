// Package loadtest measures the collector binaries: the gateway's CPU
// per million spans, points and log records against a contrib-only
// baseline derived from the same configuration (RunGateway,
// CompareGateway), and one agent's CPU share and memory on a simulated
// 8-GPU node (RunAgent). cmd/loadgen prints the results as Markdown; the
// e2e-tagged test runs the gateway harness at a small size and checks that
// nothing was lost.
//
// The gateway runs as its binary (bin/otelcol-gpu-gateway) against an
// in-process Kafka-protocol broker (kfake) and in-process accept-all
// backends that count what arrives; its CPU time is utime+stime from
// /proc/<pid>/stat, read around each signal's phase, the idle rate
// subtracted. A phase ends when every consumer group of the configuration
// has committed the end of its topic and the backend has seen nothing new
// for a quiet period (longer than tail sampling's decision_wait).
package loadtest // import "github.com/otelcol-gpu/otelcol-gpu/test/loadtest"
