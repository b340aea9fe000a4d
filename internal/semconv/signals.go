package semconv

import "slices"

// The components that emit the signals of the fault correlator's rules, by
// their directory in this module (sdk/python: the training scripts' SDK).
// signals_test.go checks that each really writes the names listed for it.
const (
	emitterDCGMReceiver      = "receiver/dcgmreceiver"
	emitterIBReceiver        = "receiver/ibreceiver"
	emitterNCCLFlightRecv    = "receiver/ncclflightreceiver"
	emitterStepSpanProcessor = "processor/stepspanprocessor"
	emitterStragglerProc     = "processor/stragglerprocessor"
	emitterStepMetricsConn   = "connector/stepmetricsconnector"
	emitterFaultCorrelator   = "connector/faultcorrelatorconnector"
	emitterPythonSDK         = "sdk/python"
	// emitterScriptLogs: a training script's own OTLP log records, which the
	// contract (docs/training-scripts.md) allows besides what the SDK sends.
	emitterScriptLogs = "docs/training-scripts.md"
)

// ruleSignal is one signal a rule may read and one component that emits it;
// a signal with several emitters has an entry for each.
type ruleSignal struct {
	name    string
	emitter string
}

// ruleSignals lists every signal a correlator rule may name
// (docs/fault-record.md, "Signals the rules read"): metric names (a rule's
// "name{k=v}" selects a point attribute of one), the log and span
// attributes the correlator turns into signals, and the signals it derives
// itself. A rule naming anything else would never hold; the correlator's
// config validation refuses it.
var ruleSignals = [...]ruleSignal{
	// Metrics of the dcgm receiver (naming: otel).
	{MetricGPUClockFrequency, emitterDCGMReceiver},
	{MetricHWTemperature, emitterDCGMReceiver},
	{MetricHWPower, emitterDCGMReceiver},
	{MetricGPUPowerLimit, emitterDCGMReceiver},
	{MetricHWEnergy, emitterDCGMReceiver},
	{MetricGPUPCIeReplays, emitterDCGMReceiver},
	{MetricHWGPUUtilization, emitterDCGMReceiver},
	{MetricHWGPUMemoryUtilization, emitterDCGMReceiver},
	{MetricGPUXIDLast, emitterDCGMReceiver},
	{MetricGPUThrottleDuration, emitterDCGMReceiver},
	{MetricHWGPUMemoryLimit, emitterDCGMReceiver},
	{MetricHWGPUMemoryUsage, emitterDCGMReceiver},
	{MetricGPUFramebuffer, emitterDCGMReceiver},
	{MetricGPUECCErrors, emitterDCGMReceiver},
	{MetricGPURetiredPages, emitterDCGMReceiver},
	{MetricGPURetiredPagesPending, emitterDCGMReceiver},
	{MetricGPURemappedRows, emitterDCGMReceiver},
	{MetricGPURowRemapFailure, emitterDCGMReceiver},
	{MetricGPUNVLinkErrors, emitterDCGMReceiver},
	{MetricGPUNVLinkBandwidth, emitterDCGMReceiver},
	{MetricGPUVGPULicense, emitterDCGMReceiver},
	{MetricGPUProfActive, emitterDCGMReceiver},
	{MetricGPUProfSMOccupancy, emitterDCGMReceiver},
	{MetricGPUProfPCIeIO, emitterDCGMReceiver},
	{MetricGPUProfNVLinkIO, emitterDCGMReceiver},
	{MetricGPUClockThrottle, emitterDCGMReceiver},
	{MetricGPUXIDErrors, emitterDCGMReceiver},
	// gpu.unresponsive: a metric, and a bool attribute of the hung-GPU log
	// records.
	{MetricGPUUnresponsive, emitterDCGMReceiver},
	// DCGM health watches: the per-GPU, per-system gauge, and the incident
	// records (text signal, also as name{k=v} of their system, result and
	// error name).
	{MetricGPUHealthStatus, emitterDCGMReceiver},
	{EventGPUHealthIncident, emitterDCGMReceiver},

	// Metrics of the ib receiver.
	{MetricHWNetworkIO, emitterIBReceiver},
	{MetricHWNetworkPackets, emitterIBReceiver},
	{MetricHWErrors, emitterIBReceiver},
	{MetricIBPortXmitWait, emitterIBReceiver},
	{MetricIBPortHWCounter, emitterIBReceiver},
	{MetricIBPortState, emitterIBReceiver},
	{MetricIBPortPhysState, emitterIBReceiver},
	{MetricIBPortRate, emitterIBReceiver},
	{MetricIBDeviceInfo, emitterIBReceiver},

	// Metrics of the ncclflight receiver.
	{MetricNCCLCollectiveDuration, emitterNCCLFlightRecv},
	{MetricNCCLCollectivesIncomplete, emitterNCCLFlightRecv},
	{MetricNCCLCollectivesTimedOut, emitterNCCLFlightRecv},

	// Metrics of the stepmetrics connector. The correlator also derives
	// training.step.duration from train.step spans (below).
	{MetricTrainingStepDuration, emitterStepMetricsConn},
	{MetricTrainingTokensRate, emitterStepMetricsConn},
	{MetricTrainingDataloadShare, emitterStepMetricsConn},
	{MetricTrainingMFU, emitterStepMetricsConn},

	// Log attributes: XID and hung-GPU records, NCCL findings.
	{AttrGPUXID, emitterDCGMReceiver},
	{AttrEventName, emitterDCGMReceiver},
	{AttrEventName, emitterNCCLFlightRecv},
	{AttrNCCLFinding, emitterNCCLFlightRecv},

	// What a training script writes, on its logs or its train.step spans.
	{AttrTrainingLoss, emitterPythonSDK},
	// training.error comes from a script's own log records: the SDK has no
	// call for it (its failed steps carry error.type on the span).
	{AttrTrainingError, emitterScriptLogs},

	// Span attributes of a rank's train.step: the summary of its NCCL
	// collectives and the GPU and IB health the stepspan processor adds.
	{AttrCollectivesCount, emitterStepSpanProcessor},
	{AttrCollectivesTotalNs, emitterStepSpanProcessor},
	{AttrCollectivesMaxNs, emitterStepSpanProcessor},
	{AttrCollectivesAnomalies, emitterStepSpanProcessor},
	{AttrHealthSMActive, emitterStepSpanProcessor},
	{AttrHealthTemperature, emitterStepSpanProcessor},
	{AttrHealthNVLinkCRC, emitterStepSpanProcessor},
	{AttrHealthECCSBE, emitterStepSpanProcessor},
	{AttrHealthECCDBE, emitterStepSpanProcessor},
	{AttrHealthIBSymbol, emitterStepSpanProcessor},
	{AttrHealthIBLinkDowned, emitterStepSpanProcessor},
	{AttrHealthThrottle, emitterStepSpanProcessor},

	// The straggler processor's verdict on rank spans.
	{AttrStragglerVerdict, emitterStragglerProc},
	{AttrStragglerJobVerdict, emitterStragglerProc},

	// Signals the correlator derives: the step's duration from a
	// train.step span, a collective span the watchdog retired, a watched
	// host's liveness and the faults it opened.
	{MetricTrainingStepDuration, emitterFaultCorrelator},
	{SignalNCCLCollectiveTimedOut, emitterFaultCorrelator},
	{SignalNodeHeartbeat, emitterFaultCorrelator},
	{SignalFaultOpened, emitterFaultCorrelator},

	// Issue 20 (H4): texts the correlator takes from a flight-recorder hang
	// finding's evidence, under each culprit rank.
	{SignalNCCLHangCollective, emitterFaultCorrelator},
	{SignalNCCLHangStack, emitterFaultCorrelator},
	{SignalNCCLFindingStepSpans, emitterFaultCorrelator},
}

// signalEmitters indexes ruleSignals by name.
var signalEmitters = func() map[string][]string {
	m := make(map[string][]string, len(ruleSignals))
	for _, s := range ruleSignals {
		m[s.name] = append(m[s.name], s.emitter)
	}
	return m
}()

// SignalEmitters returns the components (directories of this module) that
// emit the signal name, nil when none does: a rule may read only a signal
// that something emits. name is the signal without a rule's "{k=v}"
// selector.
func SignalEmitters(name string) []string {
	return slices.Clone(signalEmitters[name]) // the index stays read-only
}
