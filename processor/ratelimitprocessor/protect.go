package ratelimitprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/ratelimitprocessor"

import (
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

// spanProtected: error spans and slow steps (step.slow, written by the
// straggler processor) are what tail sampling and fault evidence need, so
// they are never dropped.
func spanProtected(sp ptrace.Span) bool {
	if sp.Status().Code() == ptrace.StatusCodeError {
		return true
	}
	v, ok := sp.Attributes().Get(semconv.AttrStepSlow)
	if !ok {
		return false
	}
	switch v.Type() {
	case pcommon.ValueTypeBool:
		return v.Bool()
	case pcommon.ValueTypeStr:
		return strings.EqualFold(v.Str(), "true")
	default:
		return false
	}
}

// protectedScopes are the scopes of records that are never limited:
// every record of the GPU and NCCL receivers (XIDs, hung GPUs, NCCL
// findings) and the correlator's fault records.
var protectedScopes = map[string]bool{
	semconv.ScopeDCGMReceiver:       true,
	semconv.ScopeNCCLFlightReceiver: true,
	semconv.ScopeFaultRecords:       true,
}

// protectedAttrs mark a record as evidence of a fault wherever it came
// from (a script's own log, kmsg relayed over OTLP).
var protectedAttrs = map[string]bool{
	"xid":                         true, // bare XID code, as some log shippers name it
	semconv.AttrGPUXID:            true, // gpu.xid: the dcgm receiver's XID records (ECC XIDs 48, 63, 64, 94, 95 among them)
	"gpu.xid.code":                true, // the same, under the gpu namespace
	semconv.MetricGPUUnresponsive: true, // gpu.unresponsive: the dcgm receiver's hung-GPU records carry it as a bool
	semconv.AttrNCCLFinding:       true, // nccl.finding: the ncclflight receiver's hang/mismatch/timeout findings
	semconv.AttrTrainingError:     true, // a script's error, read by the correlator
	semconv.AttrTrainingLoss:      true, // a script's loss, read by the correlator's loss rules
}

// protectedEventPrefixes: gpu.xid, gpu.unresponsive, gpu.fault, nccl.finding
// and whatever those namespaces add.
var protectedEventPrefixes = []string{"gpu.", "nccl.", fault.FaultAttrPrefix}

func protectedEvent(name string) bool {
	for _, p := range protectedEventPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// recordProtected reports whether a record is fault evidence or a step
// record by its event name or attributes (severity and scope are checked
// by the caller).
func recordProtected(lr plog.LogRecord) bool {
	if protectedEvent(lr.EventName()) {
		return true
	}
	protected, step, duration := false, false, false
	lr.Attributes().Range(func(k string, v pcommon.Value) bool {
		switch {
		case protectedAttrs[k]:
			protected = true
		case k == semconv.AttrEventName:
			protected = v.Type() == pcommon.ValueTypeStr && protectedEvent(v.Str())
		case strings.HasPrefix(k, fault.FaultAttrPrefix):
			protected = true
		// iteration.step with duration_ns is a step record sent as a log
		// (connector/steplogsconnector turns it into the rank's train.step span).
		case k == semconv.AttrIterationStep:
			step = true
		case k == semconv.AttrDurationNs:
			duration = true
		}
		return !protected
	})
	return protected || (step && duration)
}

// effectiveSeverity is the record's severity number or, when unset (or
// negative), the level its severity text names (0 when it names none).
func effectiveSeverity(lr plog.LogRecord) plog.SeverityNumber {
	if n := lr.SeverityNumber(); n > plog.SeverityNumberUnspecified {
		return n
	}
	return severityFromText(lr.SeverityText())
}

// textLevels maps severity text prefixes (any case) to the level's first
// number: WARNING, ERR, CRITICAL, EMERGENCY and the like included.
var textLevels = []struct {
	prefix string
	level  plog.SeverityNumber
}{
	{"TRACE", plog.SeverityNumberTrace},
	{"DEBUG", plog.SeverityNumberDebug},
	{"INFO", plog.SeverityNumberInfo},
	{"NOTICE", plog.SeverityNumberInfo2},
	{"WARN", plog.SeverityNumberWarn},
	{"ERR", plog.SeverityNumberError},
	{"SEVERE", plog.SeverityNumberError},
	{"CRIT", plog.SeverityNumberFatal},
	{"ALERT", plog.SeverityNumberFatal},
	{"EMERG", plog.SeverityNumberFatal},
	{"FATAL", plog.SeverityNumberFatal},
	{"PANIC", plog.SeverityNumberFatal},
}

func severityFromText(text string) plog.SeverityNumber {
	text = strings.TrimSpace(text)
	for _, l := range textLevels {
		if len(text) >= len(l.prefix) && strings.EqualFold(text[:len(l.prefix)], l.prefix) {
			return l.level
		}
	}
	return plog.SeverityNumberUnspecified
}
