package semconv

// Instrumentation scope names that another component checks.
const (
	// ScopeFaultRecords is the scope of the fault records the faultcorrelator
	// connector writes. The remediation exporter acts only on records of this
	// scope, and the rate limiter never drops them. It keeps the package path
	// the correlator had when the records were first written (it moved to
	// connector/faultcorrelatorconnector later): gpu_faults keeps records for
	// 30 days, and a replay of older records must still be recognised.
	ScopeFaultRecords = "github.com/otelcol-gpu/otelcol-gpu/processor/faultcorrelator"
	// ScopeDCGMReceiver and ScopeNCCLFlightReceiver are the scopes of the
	// receivers whose XID, hang and NCCL records the rate limiter protects.
	ScopeDCGMReceiver       = "github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver"
	ScopeNCCLFlightReceiver = "github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver"
)

// Signals the correlator derives itself (docs/fault-record.md, "Signals the
// rules read"); rules name them like any emitted signal.
const (
	SignalNodeHeartbeat = "node.heartbeat"
	SignalFaultOpened   = "fault.opened"
)
