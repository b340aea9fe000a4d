package semconv

import (
	"path/filepath"
	"testing"
)

// notHardware are the names the hardware receivers use that are no
// hardware signal, each with the reason a sender over OTLP may send it.
var notHardware = map[string]string{
	"AttrHostName":           "identity: the provenance processor stamps the agent's own",
	"AttrGPUUUID":            "identity: checked against the node's GPU inventory",
	"AttrGPUIndex":           "identity: checked against the node's GPU inventory",
	"AttrEventName":          "scripts send it (train.step step records); judged by its value",
	"AttrErrorType":          "scripts send it on failed steps (docs/training-scripts.md)",
	"AttrNetworkIODirection": "a generic OpenTelemetry attribute, no signal on its own",
	"AttrServiceName":        "the sender's own program (docs/training-scripts.md)",
	"AttrServiceInstanceID":  "the sender's own instance",
	"AttrK8sPodName":         "workload attribution, sent by scripts' resource detectors",
	"AttrK8sNamespaceName":   "workload attribution, sent by scripts' resource detectors",
	"AttrK8sContainerName":   "workload attribution, sent by scripts' resource detectors",
	"AttrProcessPID":         "the training process (docs/training-scripts.md)",
	"AttrProcessName":        "the training process",
	"AttrSlurmJobID":         "workload attribution",
	"AttrTrainingJobID":      "training contract (docs/training-scripts.md)",
	"AttrTrainingAttempt":    "training contract (docs/training-scripts.md): the flight recorder reads it from the dump's path",
	"AttrTrainingRank":       "training contract (docs/training-scripts.md)",
	"AttrTrainingWorldSize":  "training contract (docs/training-scripts.md)",
}

var hardwareReceivers = []string{"receiver/dcgmreceiver", "receiver/ibreceiver", "receiver/ncclflightreceiver", "receiver/gpurepairreceiver"}

// Every metric, attribute and event name the GPU, IB and NCCL receivers
// write (their non-test code, and the module packages it imports, use the
// constant) is a hardware signal or exempt above: a name added to a
// receiver cannot slip past the provenance processor unnoticed.
func TestHardwareSignalsCoverTheReceivers(t *testing.T) {
	values := map[string]string{}
	kinds := map[string]string{}
	for _, c := range packageConstants(t) {
		values[c.ident], kinds[c.ident] = c.value, c.kind()
	}
	usedExemptions := map[string]bool{}
	checked := 0
	for _, r := range hardwareReceivers {
		for ident := range semconvUses(t, filepath.Join(moduleRoot, r)) {
			switch kinds[ident] {
			case "Attr", "Metric", "Event", "Signal", "Span":
			default:
				continue // values, scopes, prefixes
			}
			checked++
			if _, ok := notHardware[ident]; ok {
				usedExemptions[ident] = true
				if HardwareSignal(values[ident]) {
					t.Errorf("%s (%q) is exempt from the hardware signals, yet HardwareSignal says it is one", ident, values[ident])
				}
				continue
			}
			if !HardwareSignal(values[ident]) {
				t.Errorf("%s uses semconv.%s (%q): no hardware signal and not exempt in notHardware", r, ident, values[ident])
			}
		}
	}
	if checked < 50 {
		t.Errorf("checked only %d names of the receivers: the walk is broken", checked)
	}
	for ident := range notHardware {
		if !usedExemptions[ident] {
			t.Errorf("notHardware exempts %s, which no hardware receiver uses: remove it", ident)
		}
	}
}

// Every rule signal of a hardware receiver is a hardware signal unless a
// script also sends it; the health attributes stepspan copies are too.
func TestHardwareSignalsFromTheRegistry(t *testing.T) {
	for _, s := range ruleSignals {
		hw := s.emitter == emitterDCGMReceiver || s.emitter == emitterIBReceiver || s.emitter == emitterNCCLFlightRecv
		scripts := false
		for _, o := range ruleSignals {
			if o.name == s.name && (o.emitter == emitterPythonSDK || o.emitter == emitterScriptLogs) {
				scripts = true
			}
		}
		if hw && !scripts && s.name != AttrEventName && !HardwareSignal(s.name) {
			t.Errorf("%s, emitted by %s, is no hardware signal", s.name, s.emitter)
		}
		if scripts && HardwareSignal(s.name) {
			t.Errorf("%s is sent by training scripts, yet a hardware signal: scripts' data would be renamed", s.name)
		}
	}
	for _, n := range []string{AttrHealthXIDs, AttrHealthECCDBE, AttrHealthIBLinkDowned, EventGPUXID, EventGPUHang, EventNCCLFinding,
		EventGPUHealthIncident, MetricGPUHealthStatus, AttrGPUHealthResult, AttrGPUHealthErrorName, AttrGPUHealthSystem, EventGPURepairResult} {
		if !HardwareSignal(n) {
			t.Errorf("%s is no hardware signal", n)
		}
	}
}

// What the training contract lets scripts send is never renamed.
func TestScriptNamesAreNoHardwareSignals(t *testing.T) {
	for _, n := range []string{
		SpanTrainStep, SpanTrainStepRoot, AttrTrainingLoss, AttrTrainingError, AttrTrainingJobID,
		AttrTrainingRank, AttrTrainingAttempt, AttrIterationStep, AttrPhaseForwardNs, AttrTrainingTokens,
		AttrCollectivesCount, AttrCollectivesTotalNs, AttrCollectivesMaxNs, AttrCollectivesAnomalies,
		AttrDurationNs, AttrErrorType, AttrHostName, AttrGPUUUID, AttrServiceName, AttrEventName,
		MetricTrainingStepDuration, "k8s.pod.uid",
	} {
		if HardwareSignal(n) {
			t.Errorf("%q is a hardware signal: a training script's legitimate data would be renamed", n)
		}
	}
	all := HardwareSignals()
	if len(all) == 0 || !HardwareSignal(all[0]) {
		t.Fatalf("HardwareSignals() = %v", all)
	}
	all[0] = "changed"
	if HardwareSignals()[0] == "changed" {
		t.Error("HardwareSignals returns the package's own slice")
	}
}

// Under naming dcgm_exporter the dcgm receiver writes DCGM_FI_* and
// DCGM_EXP_* metrics; they are hardware signals too.
func TestDCGMExporterNamesAreHardware(t *testing.T) {
	for _, n := range []string{"DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_EXP_GPU_UNRESPONSIVE"} {
		if !HardwareSignal(n) {
			t.Errorf("%s is no hardware signal", n)
		}
	}
	if HardwareSignal("dcgm_custom") {
		t.Error("only the DCGM_ prefix is reserved")
	}
}

// HardwareSignal's first-byte filter loses no name of the list.
func TestHardwareSignalFindsEveryName(t *testing.T) {
	for name := range hardwareSignals {
		if !HardwareSignal(name) {
			t.Errorf("%q is in the list, yet HardwareSignal says no", name)
		}
	}
	if HardwareSignal("") {
		t.Error("the empty name is no hardware signal")
	}
}
