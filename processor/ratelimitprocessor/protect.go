package ratelimitprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/ratelimitprocessor"

import (
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

// class is how an item is treated by its budgets.
type class uint8

const (
	// unprotected items pass while their bucket has a token.
	unprotected class = iota
	// priority items are what tail sampling and fault evidence need, but
	// any sender can claim them (an error status, step.slow, WARN, a
	// protected scope name): they are charged like any item and may take
	// the bucket down to minus the protected reserve, so they are dropped
	// last, and a sender that marks everything protected still gets its
	// budget plus the reserve, not more.
	priority
	// trusted items carry names that only this collector's own receivers
	// may write (hardware signals, fault.* attributes): the agent's
	// provenance processor renames them under forged. in everything that
	// arrives over OTLP, and the gateway reads only what agents vetted.
	// They are never charged.
	trusted
)

// spanClass: error spans and slow steps (step.slow, written by the
// straggler processor) are priority; a script can set both.
func spanClass(sp ptrace.Span) class {
	if sp.Status().Code() == ptrace.StatusCodeError {
		return priority
	}
	v, ok := sp.Attributes().Get(semconv.AttrStepSlow)
	if !ok {
		return unprotected
	}
	switch v.Type() {
	case pcommon.ValueTypeBool:
		if v.Bool() {
			return priority
		}
	case pcommon.ValueTypeStr:
		if strings.EqualFold(v.Str(), "true") {
			return priority
		}
	}
	return unprotected
}

// protectedScopes are the scopes of the GPU and NCCL receivers (XIDs,
// hung GPUs, NCCL findings) and of the correlator's fault records. A
// scope name is a sender's claim: their records are priority; those that
// carry a hardware signal or a fault.* attribute are trusted.
var protectedScopes = map[string]bool{
	semconv.ScopeDCGMReceiver:       true,
	semconv.ScopeNCCLFlightReceiver: true,
	semconv.ScopeFaultRecords:       true,
}

// protectedAttrs mark a record as evidence of a fault wherever it came
// from (a script's own log, kmsg relayed over OTLP): priority, or trusted
// when the name is a hardware signal (semconv.HardwareSignal).
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

// recordClass classes a record by its event name and attributes; a
// protected scope or a severity of WARN or more (checked by the caller)
// make an unprotected record priority.
func recordClass(lr plog.LogRecord) class {
	c := eventClass(lr.EventName())
	if c == trusted {
		return c
	}
	step, duration := false, false
	lr.Attributes().Range(func(k string, v pcommon.Value) bool {
		switch {
		case strings.HasPrefix(k, fault.FaultAttrPrefix):
			// forged.fault.* (provenance, fault.StripForged) does not match.
			c = trusted
		case k == semconv.AttrEventName:
			if v.Type() == pcommon.ValueTypeStr {
				c = max(c, eventClass(v.Str()))
			}
		case protectedAttrs[k]:
			if semconv.HardwareSignal(k) {
				c = trusted
			} else {
				c = max(c, priority)
			}
		// iteration.step with duration_ns is a step record sent as a log
		// (connector/steplogsconnector turns it into the rank's train.step span).
		case k == semconv.AttrIterationStep:
			step = true
		case k == semconv.AttrDurationNs:
			duration = true
		}
		return c != trusted
	})
	if c == unprotected && step && duration {
		c = priority
	}
	return c
}

// eventClass: hardware event names (gpu.xid, gpu.unresponsive,
// nccl.finding) are trusted, the rest of the protected namespaces
// priority.
func eventClass(name string) class {
	switch {
	case semconv.HardwareSignal(name):
		return trusted
	case protectedEvent(name):
		return priority
	default:
		return unprotected
	}
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
