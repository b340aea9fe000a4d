package remediationexporter // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter"

import (
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/audit"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/lifecycle"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

// heldSinceRestart is the hold on a node quarantined by an earlier life:
// the audit file does not say whether the policy allowed its return to
// service, nor which other faults were open on it, so a human decides.
const heldSinceRestart = "quarantined before the exporter restarted"

// restoreFromAudit rebuilds, from the audit file of earlier lives, what
// keeps the exporter idempotent across a restart: per fault id the node
// actions applied, the webhook sent (and its severity) and whether it is
// resolved; per node the quarantine it holds and its last return to
// service. Entries older than the fault state's retention are ignored, so
// the state is bounded as in one life. Unreadable lines are skipped (Replay
// warns); nothing here fails start-up. Callers hold e.mu.
func (e *remediationExporter) restoreFromAudit() {
	if e.cfg.AuditFile == "" {
		return
	}
	horizon := e.clock.Now().Add(-lifecycle.OpenRetention)
	if e.cfg.Console != "" { // shown once the console is known (Start)
		e.restored = newRestoredFaults()
	}
	replayed, err := audit.Replay(e.logger, e.cfg.AuditFile, func(entry audit.Entry) {
		if entry.Time.Before(horizon) { // a zero time too: it cannot be aged
			return
		}
		e.restore(entry)
		if e.restored != nil {
			e.restored.add(entry)
		}
	})
	if err != nil {
		e.logger.Warn("audit file not read to its end: faults acted on before the restart may be acted on again",
			zap.String("file", e.cfg.AuditFile), zap.Error(err))
	}
	held := e.state.HoldQuarantined(heldSinceRestart)
	if replayed > 0 {
		e.logger.Info("remediation state restored from the audit file", zap.String("file", e.cfg.AuditFile),
			zap.Int("entries", replayed), zap.Int("faults", e.state.Faults()), zap.Int("quarantined_nodes", held))
	}
}

// restore applies one audit entry of an earlier life to the state, as the
// decision that wrote it did. Callers hold e.mu.
func (e *remediationExporter) restore(entry audit.Entry) {
	// Only what this life would itself have done counts: a dry run did
	// nothing, so it does not stand for an action once the exporter acts.
	done := entry.Decision == audit.DecisionActed || (entry.Decision == audit.DecisionDryRun && e.cfg.DryRun)
	switch {
	case entry.Step == stepQuarantine && entry.FaultID != "" && entry.Node != "" && entry.Platform == e.platformName():
		// The platform's final answers (foreign, excluded, not found) are
		// skipped entries with an outcome: applied for the fault, not ours.
		final := entry.Decision == audit.DecisionSkipped && entry.Outcome != ""
		if !done && !final {
			break
		}
		actions := make([]actuator.Action, len(entry.Actions))
		for i, a := range entry.Actions {
			actions[i] = actuator.Action(a)
		}
		e.state.RestoreQuarantine(entry.FaultID, entry.Node, actions, done, entry.Time)
	case entry.Step == stepWebhook && done && entry.Rule != "" && entry.State != string(fault.StateResolved):
		// A rule names a fault's own webhook (not the breaker's page).
		e.state.RestoreWebhook(entry.FaultID, entry.Node, fault.Severity(entry.Severity), entry.Time)
	case entry.Step == stepBreaker:
		e.restoreBreakerEvent(entry)
	case entry.Step == stepRepair && entry.Node != "" && entry.LifecycleStep != "" && e.repairOn() &&
		(done || entry.RepairRef == lifecycle.RefUnconfirmed || (entry.Decision == audit.DecisionFailed && len(entry.Verification) > 0)):
		// With the loop off now, its nodes are held for a human instead.
		e.restoreRepair(entry)
	case entry.Step == stepRelease && entry.Node != "" &&
		(done || (entry.Decision == audit.DecisionSkipped && entry.Outcome != "")):
		// Returned to service, or no longer ours (a human took over).
		e.state.RestoreRelease(entry.Node, entry.Time)
	}
	if entry.State == string(fault.StateResolved) && entry.FaultID != "" {
		e.state.RestoreResolved(entry.FaultID, entry.Node, entry.Time)
	}
	e.restoreCapWaiting(entry)
}
