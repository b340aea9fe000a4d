package semconv

import (
	"slices"
	"sort"
	"strings"
)

// The hardware signals: what the agent's own GPU, InfiniBand and NCCL
// receivers emit (and the GPU and IB health the stepspan processor copies
// from them onto step spans). Only those receivers may write them: the
// provenance processor renames every one arriving over OTLP under
// "forged." so that no rule reads a sender's claim of a hardware event.
//
// A name that training scripts also send (docs/training-scripts.md, the
// Python SDK) is no hardware signal: a script's claim passes, and the
// host.name the agent stamps confines it to the node that received it.
// event.name is judged by its value (HardwareSignal of the value), since
// scripts send it too (train.step).

// DCGMExporterMetricPrefix starts the metric names of the dcgm receiver
// under naming dcgm_exporter (DCGM_FI_DEV_XID_ERRORS, DCGM_EXP_*): all of
// them are hardware signals.
const DCGMExporterMetricPrefix = "DCGM_"

// Names the ncclflight receiver still writes as literals (receiver.go,
// metrics.go); declared here so that the hardware list covers them.
const (
	// AttrNCCLEvidence is the evidence text of an NCCL finding record.
	AttrNCCLEvidence = "nccl.evidence"
	// MetricNCCLCollectiveBusBandwidth is a collective's bus bandwidth.
	MetricNCCLCollectiveBusBandwidth = "nccl.collective.bus_bandwidth"
)

// hardwareEmitters are the receivers whose rule signals are hardware
// signals.
var hardwareEmitters = []string{emitterDCGMReceiver, emitterIBReceiver, emitterNCCLFlightRecv}

// scriptEmitters send over OTLP legitimately.
var scriptEmitters = []string{emitterPythonSDK, emitterScriptLogs}

// hardwareAttributes are the attributes those receivers write besides the
// rule signals of ruleSignals: the details of an XID or a hang, NCCL
// collective spans and findings, the point attributes of their metrics,
// the descriptions of a GPU or HCA, and the health on step spans.
// hardware_test.go checks that every name the receivers use is here, in
// ruleSignals, or exempt there with a reason.
var hardwareAttributes = []string{
	// dcgm receiver: XID and hung-GPU records, point attributes, GPU
	// descriptions (identity is gpu.uuid / gpu.index, checked separately).
	AttrGPUXIDName, AttrGPUXIDAction, AttrGPUXIDSource,
	AttrGPUClockType, AttrHWSensorLocation, AttrHWGPUTask, AttrGPUThrottleReason,
	AttrGPUFramebufferState, AttrGPUECCType, AttrGPURetirementCause, AttrGPURemapType,
	AttrGPUProfUnit,
	AttrGPUModel, AttrGPUPCIBusID, AttrGPUDevice, AttrGPUDriverVersion,
	AttrGPUMIGInstanceID, AttrGPUMIGComputeID, AttrGPUMIGProfile,
	// DCGM health-watch incident records and the health gauge's points.
	AttrGPUHealthSystem, AttrGPUHealthResult, AttrGPUHealthErrorCode,
	AttrGPUHealthErrorName, AttrGPUHealthErrorMessage, AttrGPUHealthNVSwitch,

	// ib receiver: port state, counters and the HCA's description.
	AttrIBDevice, AttrIBPort, AttrIBLinkLayer, AttrIBState, AttrIBPhysState,
	AttrIBHWCounter, AttrIBHCAType, AttrIBBoardID, AttrIBFWVer, AttrIBNodeGUID,

	// ncclflight receiver: collective spans (the correlator turns a timed
	// out one, nccl.collective set, into nccl.collective.timed_out) and
	// findings. Scripts' collectives reach the agent as flight-recorder
	// files, which this receiver reads, never as OTLP spans.
	AttrNCCLCollectiveSeq, AttrNCCLP2PSeq, AttrNCCLOpID, AttrNCCLRecordID,
	AttrNCCLCollective, AttrNCCLPGID, AttrNCCLPGName, AttrNCCLPGDesc, AttrNCCLCommID,
	AttrNCCLMessageBytes, AttrNCCLDtypes, AttrNCCLState, AttrNCCLTimeoutMs,
	AttrNCCLP2PPeer, AttrNCCLTimingSource, AttrNCCLBusBandwidth, AttrNCCLAlgoBandwidth,
	AttrNCCLSource, AttrNCCLFindingKey, AttrNCCLRanks, AttrNCCLEvidence,
	MetricNCCLCollectiveBusBandwidth,

	// The health the stepspan processor attaches from the nodestate
	// extension (the correlator reads it as signals of its rules).
	AttrHealthSMActive, AttrHealthTemperature, AttrHealthThrottle, AttrHealthNVLinkCRC,
	AttrHealthECCSBE, AttrHealthECCDBE, AttrHealthXIDs, AttrHealthWindowS,
	AttrHealthIBSymbol, AttrHealthIBLinkDowned,

	// gpu_repair receiver: the results of the repair jobs the gateway
	// asked for (repair.go).
	EventGPURepairResult, AttrGPURepairJobID, AttrGPURepairKind, AttrGPURepairState,
	AttrGPURepairFaultID, AttrGPURepairDetail,
}

var hardwareSignals = func() map[string]struct{} {
	sent := map[string]bool{}
	for _, s := range ruleSignals {
		if slices.Contains(scriptEmitters, s.emitter) {
			sent[s.name] = true
		}
	}
	m := map[string]struct{}{}
	for _, s := range ruleSignals {
		if slices.Contains(hardwareEmitters, s.emitter) && s.name != AttrEventName && !sent[s.name] {
			m[s.name] = struct{}{}
		}
	}
	for _, a := range hardwareAttributes {
		m[a] = struct{}{}
	}
	return m
}()

// HardwareSignal reports whether name (a metric name, an attribute key, or
// an event.name value) is a hardware signal that only the agent's own
// receivers may emit.
func HardwareSignal(name string) bool {
	if name == "" {
		return false
	}
	// Every hardware name starts gpu., hw., ib., nccl. or DCGM_: most keys
	// of a script's span (training.*, iteration.step, service.name) are
	// told apart by their first byte, without hashing.
	switch name[0] {
	case 'g', 'h', 'i', 'n':
		_, ok := hardwareSignals[name]
		return ok
	case 'D':
		return strings.HasPrefix(name, DCGMExporterMetricPrefix)
	}
	return false
}

// HardwareSignals returns every hardware signal name, sorted; names
// starting with DCGMExporterMetricPrefix are hardware signals too.
func HardwareSignals() []string {
	out := make([]string, 0, len(hardwareSignals))
	for n := range hardwareSignals {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
