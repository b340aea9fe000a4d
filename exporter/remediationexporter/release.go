package remediationexporter // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter"

import (
	"context"
	"fmt"
	"strings"

	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/audit"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/lifecycle"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

// resolve handles a resolved record: bookkeeping, a resolution webhook, and
// a return to service once every fault on the node is resolved. Callers
// hold e.mu.
func (e *remediationExporter) resolve(ctx context.Context, r fault.Record) error {
	e.capForget(r.ID) // no longer waits behind the quarantine cap
	res := e.state.Resolve(r.ID, nodeOf(r), e.clock.Now())
	if res.Skip != "" {
		e.record(withDecision(entryFor(r, stepRecord), audit.DecisionSkipped, res.Skip))
		return nil
	}
	var err error
	if res.Webhooked {
		err = e.notifyResolved(ctx, r, res.Node)
	}
	rd := res.Release
	switch {
	case rd.Skip != "":
		entry := entryFor(r, stepRelease)
		entry.Node, entry.Platform, entry.Actions = rd.Release.Node, e.platformName(), actionNames(rd.Release.Actions)
		e.record(withDecision(entry, audit.DecisionSkipped, rd.Skip))
		e.countDecision(ctx, actionRelease, outcomeRefused, rd.Rail)
	case rd.Schedule:
		e.scheduleRelease(rd.Release)
	}
	return err
}

// releaseTimer is one verification window. Its callback acts only while it
// is still its node's window: a timer that fired while a new fault
// cancelled the release (its stop then fails) and the node's faults
// resolved again would otherwise release the node at the start of the new
// window.
type releaseTimer struct {
	stop func() bool
}

// scheduleRelease starts the verification window of a release the state
// scheduled. Callers hold e.mu.
func (e *remediationExporter) scheduleRelease(rel lifecycle.Release) {
	name := rel.Node
	window := &releaseTimer{}
	window.stop = e.clock.AfterFunc(e.cfg.VerificationWindow, func() { e.releaseAfterWindow(name, window) })
	e.releaseTimers[name] = window
	e.logger.Info("remediation: return to service scheduled after the verification window",
		zap.String("node", name), zap.Duration("verification_window", e.cfg.VerificationWindow), zap.Strings("fault.ids", rel.FaultIDs))
}

// releaseCancelled stops the window of a release the state cancelled, and
// audits why. Callers hold e.mu.
func (e *remediationExporter) releaseCancelled(rel lifecycle.Release, why string) {
	if window := e.releaseTimers[rel.Node]; window != nil {
		window.stop()
		delete(e.releaseTimers, rel.Node)
	}
	e.record(audit.Entry{Decision: audit.DecisionSkipped, Step: stepRelease, Node: rel.Node, Platform: e.platformName(),
		Actions: actionNames(rel.Actions), Reason: "return to service cancelled: " + why})
}

// stopPendingReleases stops every verification window at shutdown: those
// nodes stay quarantined. Callers hold e.mu.
func (e *remediationExporter) stopPendingReleases() {
	for name, window := range e.releaseTimers {
		if window.stop() {
			e.record(audit.Entry{Decision: audit.DecisionSkipped, Step: stepRelease, Node: name, Platform: e.platformName(),
				Reason: "shutdown before the verification window ended: the node stays quarantined"})
		}
		e.state.CancelRelease(name)
		delete(e.releaseTimers, name)
	}
}

// releaseAfterWindow runs on the verification window's timer.
func (e *remediationExporter) releaseAfterWindow(name string, window *releaseTimer) {
	if !e.enter() {
		return
	}
	defer e.inFlight.Done()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.releaseTimers[name] != window {
		return // this window was cancelled; a later one, if any, decides
	}
	rel, ok := e.state.BeginRelease(name)
	if !ok {
		return // cancelled meanwhile
	}
	delete(e.releaseTimers, name)
	// The node count changes with the release's outcome.
	defer e.recordQuarantined()
	entry := audit.Entry{Step: stepRelease, Node: name, Platform: e.platformName(), Actions: actionNames(rel.Actions),
		FaultID: strings.Join(rel.FaultIDs, ",")}
	_, _, _ = e.releaseNode(e.lifeCtx, rel, entry, "resolved: "+strings.Join(rel.FaultIDs, ","))
}

// releaseNode returns a node the exporter holds to service: the one path of
// the automatic release (the verification window's end) and a human's
// (the console). The rails: the leader acts, a dry run only audits, the
// platform's Release gets every fault id of rel so that its ownership rules
// apply (a node someone else took over is left alone), retried; each
// outcome is audited (entry, prefilled) and counted. released reports that
// the exporter no longer holds the node (returned to service, would be in a
// dry run, or no longer ours); detail is what was done. Callers hold e.mu.
func (e *remediationExporter) releaseNode(ctx context.Context, rel lifecycle.Release, entry audit.Entry, why string) (released bool, detail string, err error) {
	name := rel.Node
	if err := e.notOwner(); err != nil {
		e.record(withDecision(entry, audit.DecisionSkipped, "not the replica that acts: the node stays quarantined: "+err.Error()))
		e.countDecision(ctx, actionRelease, outcomeSkipped, "")
		return false, "", err
	}
	// Every fault of ours goes with the request: the platform may know the
	// quarantine under any one of them (Slurm's reason names only the first).
	req := actuator.Request{Node: name, FaultID: rel.FaultIDs[0], FaultIDs: rel.FaultIDs, Actions: rel.Actions, Reason: why}
	if e.cfg.DryRun || e.platform == nil {
		detail = fmt.Sprintf("would call Release on %s: node=%s actions=[%s]", e.platformName(), name, strings.Join(entry.Actions, ","))
		e.record(withDecision(entry, audit.DecisionDryRun, detail))
		e.state.Released(name, e.clock.Now())
		e.countDecision(ctx, actionRelease, outcomeDryRun, "")
		return true, detail, nil
	}
	res, attempts, err := e.retry(ctx, timedCall(e, opRelease, func(ctx context.Context) (actuator.Result, error) { return e.platform.Release(ctx, req) }))
	entry.Attempts, entry.Outcome = attempts, string(res.Outcome)
	switch {
	case err != nil:
		// Stays quarantined: safe. A human (or the next resolved fault on
		// the node) takes it from here.
		e.record(withDecision(entry, audit.DecisionFailed, err.Error()))
		e.countDecision(ctx, actionRelease, outcomeFailed, "")
		return false, "", fmt.Errorf("remediationexporter: release %s: %w", name, err)
	case res.Outcome == actuator.Applied || res.Outcome == actuator.AlreadyDone:
		e.record(withDecision(entry, audit.DecisionActed, res.Detail))
		e.state.Released(name, e.clock.Now())
		e.countDecision(ctx, actionRelease, outcomeActed, "")
		e.capRoomMaybe() // a fault waiting behind the quarantine cap may act
		return true, string(res.Outcome) + ": " + res.Detail, nil
	default: // not ours any more (a human took over): forget it, touch nothing
		detail = string(res.Outcome) + ": " + res.Detail
		e.record(withDecision(entry, audit.DecisionSkipped, detail))
		e.state.Released(name, e.clock.Now())
		e.countDecision(ctx, actionRelease, outcomeRefused, railOf(res.Outcome))
		return true, detail, nil
	}
}
