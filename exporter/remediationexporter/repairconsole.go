package remediationexporter // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter"

import (
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/audit"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/lifecycle"
	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/console"
	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
)

// lifecycleView is a repair loop as the console shows it (nil: none).
// Repair is the repair in flight or last asked for ("" before the first,
// as the contract says); the loop's Action is the one it is at.
func lifecycleView(l *lifecycle.Loop) *console.Lifecycle {
	if l == nil {
		return nil
	}
	v := &console.Lifecycle{Step: string(l.Step), Since: l.Since, History: make([]console.LifecycleStep, len(l.History)),
		Verifications: make([]console.Verification, len(l.Verifications))}
	asked := false
	for i, ev := range l.History {
		v.History[i] = console.LifecycleStep{Step: string(ev.Step), At: ev.At, Detail: ev.Detail}
		asked = asked || ev.Step == repair.StepRepairing || ev.Step == repair.StepRMA
	}
	if asked {
		v.Repair, v.Attempt = string(l.Action), l.Attempt
	}
	checks := describeChecks(l.Checks)
	for i, ver := range l.Verifications {
		v.Verifications[i] = console.Verification{At: ver.At, Checks: checks, Passed: ver.Passed, Detail: describeResults(ver.Results)}
	}
	return v
}

// showVerification records a verification's outcome (entry, its audit
// entry) on the fault in the console, as a decision about its record.
// Callers hold e.mu.
func (e *remediationExporter) showVerification(l lifecycle.Loop, entry audit.Entry) {
	if e.console == nil {
		return
	}
	for _, r := range e.repairRecords[l.Node] {
		if r.ID == l.FaultID {
			if entry.Time.IsZero() {
				entry.Time = e.clock.Now().UTC()
			}
			e.recordToConsole(r, []audit.Entry{entry})
			return
		}
	}
}
