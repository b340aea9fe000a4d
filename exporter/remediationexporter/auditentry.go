package remediationexporter // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter"

import (
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/audit"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

// Audit steps: the part of the remediation an entry is about. Restore
// reads them back, so their values are part of the audit file's format.
const (
	stepRecord     = "record"
	stepQuarantine = "quarantine"
	stepRelease    = "release"
	stepWebhook    = "webhook"
)

// record writes an audit entry, stamped now. Callers hold e.mu.
func (e *remediationExporter) record(entry audit.Entry) {
	if entry.Time.IsZero() {
		entry.Time = e.clock.Now().UTC()
	}
	if e.holding != nil { // decide publishes them first
		*e.holding = append(*e.holding, entry)
		return
	}
	if e.capture != nil { // the console shows what a record's decision wrote
		*e.capture = append(*e.capture, entry)
	}
	if e.audit == nil { // ConsumeLogs before Start (tests of the core only)
		e.audit, _ = audit.Open(e.logger, "")
	}
	_ = e.audit.Record(entry)
}

func entryFor(r fault.Record, step string) audit.Entry {
	return audit.Entry{Step: step, FaultID: r.ID, FaultType: r.IDType(), State: string(r.State), Severity: string(r.Severity)}
}

func withDecision(e audit.Entry, decision, reason string) audit.Entry {
	e.Decision, e.Reason = decision, reason
	return e
}

func withRule(e audit.Entry, rule string) audit.Entry {
	e.Rule = rule
	return e
}

func actionNames(as []actuator.Action) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = string(a)
	}
	return out
}
