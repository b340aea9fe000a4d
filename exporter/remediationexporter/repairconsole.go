package remediationexporter // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter"

import (
	"slices"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/audit"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/lifecycle"
	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/console"
)

// lifecycleView is a repair loop as the console shows it (nil: none).
func lifecycleView(l *lifecycle.Loop) *console.Lifecycle {
	if l == nil {
		return nil
	}
	v := &console.Lifecycle{Step: l.Step, Since: l.Since, Action: l.Action, Attempt: l.Attempt, Ladder: slices.Clone(l.Ladder),
		History: make([]console.LifecycleEvent, len(l.History)), Verification: slices.Clone(l.Results)}
	for i, ev := range l.History {
		v.History[i] = console.LifecycleEvent{Step: ev.Step, At: ev.At, Detail: ev.Detail, Action: ev.Action, Attempt: ev.Attempt}
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
