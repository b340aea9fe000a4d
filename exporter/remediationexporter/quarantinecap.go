package remediationexporter // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter"

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/audit"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/lifecycle"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/policy"
	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/console"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

// The quarantined-share cap (max_quarantined_fraction) tells someone when
// it refuses a fault: whoever can forge hardware signals on a tenth of the
// fleet fills the cap, and a genuine fault on another node is then refused.
// A refusal is counted by severity, the fault waits (a gauge, the state an
// alert pages on, and the console's banner) until it is acted on, and with
// quarantine_cap_trips_breaker the breaker trips so that a human decides.
// README.md, "Safety rails".

const (
	// capReasonPrefix starts the audit reason of a refusal by the cap;
	// restore reads it back.
	capReasonPrefix = "quarantine cap: "
	// reasonBreakerTripped is the audit reason of a quarantine the tripped
	// breaker refused; restore reads it back.
	reasonBreakerTripped = "circuit breaker tripped: quarantining stopped until a human resets it"
	// maxCapWaiting bounds the faults remembered as waiting behind the
	// cap; past it the least severe, most recent is forgotten (and
	// logged): the longest waits are kept.
	maxCapWaiting = 1000
	// capRetryInterval: while faults wait, the cap is read again this
	// often, and the waiting faults are acted on once it has room.
	capRetryInterval = time.Minute
	// opBreakerTrip is the breaker's Trip call, as the platform call
	// instruments name it.
	opBreakerTrip = "breaker_trip"
)

// capWaiter is a fault the cap refused and the exporter has not acted on.
type capWaiter struct {
	id, typ, severity, node string
	since, last             time.Time
	// rec and d are the record and decision to act with; rec.ID is ""
	// for a fault restored from the audit or the decision log, which acts
	// with its next record.
	rec fault.Record
	d   policy.Decision
	// notified: its refusal tripped the breaker, found it tripped, or was
	// made by an earlier life or another replica; it does not trip again.
	notified bool
}

// capState is what the exporter knows of the cap. Guarded by e.mu.
type capState struct {
	waiting map[string]*capWaiter
	// gpuNodes and held: the platform's counts at readAt (the last Check).
	gpuNodes, held int
	readAt         time.Time
	// watch re-reads the cap while faults wait (nil: none runs).
	watch *releaseTimer
}

// overQuarantineCap says why quarantining one more node would put more
// than max_quarantined_fraction of the GPU nodes in quarantine by us; ""
// when it would not. A node already ours adds nothing. Callers hold e.mu.
func (e *remediationExporter) overQuarantineCap(elig actuator.Eligibility) string {
	e.capq.gpuNodes, e.capq.held, e.capq.readAt = elig.GPUNodes, elig.Quarantined, e.clock.Now()
	if elig.Ours {
		return ""
	}
	limit := quarantineCap(e.cfg.MaxQuarantinedFraction, elig.GPUNodes)
	if elig.Quarantined+1 <= limit {
		return ""
	}
	return fmt.Sprintf(capReasonPrefix+"%d of %d GPU nodes already quarantined by this exporter (max_quarantined_fraction %v allows %d)",
		elig.Quarantined, elig.GPUNodes, e.cfg.MaxQuarantinedFraction, limit)
}

// quarantineCap is floor(fraction × gpuNodes), at least one node, as the
// breakers count their budget. The epsilon keeps 0.29 × 100 from flooring
// to 28.
func quarantineCap(fraction float64, gpuNodes int) int {
	return max(1, int(math.Floor(fraction*float64(gpuNodes)+1e-9)))
}

// refuseByQuarantineCap is the cap's refusal of r's quarantine of node:
// audited by refuse, counted by severity, the fault waits (gauge, console),
// and with quarantine_cap_trips_breaker its first refusal trips the
// breaker. Not final: the fault is acted on once the cap has room.
// Callers hold e.mu.
func (e *remediationExporter) refuseByQuarantineCap(ctx context.Context, r fault.Record, d policy.Decision, node, reason string,
	refuse func(rail, reason string) (string, string, []string, error),
) (string, string, []string, error) {
	outcome, why, actions, _ := refuse(railQuarantineCap, reason)
	e.telemetry.RemediationQuarantineCapRefusals.Add(context.WithoutCancel(ctx), 1, metric.WithAttributeSet(attribute.NewSet(
		attribute.String(metadata.TelemetryAttrPlatform, e.platformName()),
		attribute.String(metadata.TelemetryAttrSeverity, string(r.Severity)))))
	w, added := e.capWait(r.ID, r.IDType(), string(r.Severity), node, e.clock.Now())
	w.rec, w.d = r, d
	if added {
		e.logger.Warn("remediation: the quarantine cap refused a fault; it waits until the cap has room (alert RemediationQuarantineCapReached)",
			zap.String("fault.id", r.ID), zap.String("fault.type", r.IDType()), zap.String("fault.severity", string(r.Severity)),
			zap.String("node", node), zap.String("reason", reason))
	}
	e.recordCapWaiting()
	var err error
	if e.cfg.QuarantineCapTripsBreaker && !w.notified {
		w.notified, err = e.tripOnCap(ctx, r, node, reason)
	}
	return outcome, why, actions, err
}

// tripOnCap trips the breaker because the cap refused r on node, and
// reports whether the refusal is now covered by a trip (this one, or one
// already there). A new trip is audited (step breaker, event tripped, the
// cap named), counted, watched and paged like the breaker's own. Callers
// hold e.mu.
func (e *remediationExporter) tripOnCap(ctx context.Context, r fault.Record, node, reason string) (bool, error) {
	detail := "tripped by the quarantine cap: " + r.IDType() + " " + r.ID + " (" + string(r.Severity) + ") on " + node +
		" refused, " + strings.TrimPrefix(reason, capReasonPrefix)
	now := e.clock.Now()
	tripped, err := timedCall(e, opBreakerTrip, func(ctx context.Context) (bool, error) {
		return e.platform.Breaker().Trip(ctx, now, detail)
	})(ctx)
	entry := audit.Entry{Step: stepBreaker, Event: breakerEventTripped, Platform: e.platformName(), Node: node,
		FaultID: r.ID, FaultType: r.IDType(), Severity: string(r.Severity)}
	if err != nil {
		e.record(withDecision(entry, audit.DecisionFailed, "breaker not tripped by the quarantine cap: "+err.Error()))
		return false, fmt.Errorf("remediationexporter: trip the breaker for fault %s refused by the quarantine cap: %w", r.ID, err)
	}
	e.recordBreaker(ctx, true)
	e.watchBreaker()
	if !tripped {
		e.breakerRead(true, "")
		return true, nil
	}
	e.breakerKnownTripped = true
	why := "circuit breaker " + detail + "; quarantining stopped until a human resets it"
	e.record(withDecision(entry, audit.DecisionActed, why))
	e.noteBreakerEvent(breakerEventTripped, "", why, now)
	e.telemetry.RemediationBreakerTrips.Add(context.WithoutCancel(ctx), 1, metric.WithAttributeSet(
		attribute.NewSet(attribute.String(metadata.TelemetryAttrPlatform, e.platformName()))))
	e.breakerAlerted = false // a new trip: it pages
	return true, e.alertBreaker(ctx, r, node)
}

// capWait adds fault id as waiting behind the cap at now, or notes its
// latest refusal; added reports a new waiter. Callers hold e.mu.
func (e *remediationExporter) capWait(id, typ, severity, node string, now time.Time) (w *capWaiter, added bool) {
	if e.capq.waiting == nil {
		e.capq.waiting = map[string]*capWaiter{}
	}
	if w := e.capq.waiting[id]; w != nil {
		if now.After(w.last) {
			w.last = now
		}
		return w, false
	}
	w = &capWaiter{id: id, typ: typ, severity: severity, node: node, since: now, last: now}
	e.capq.waiting[id] = w
	if len(e.capq.waiting) > maxCapWaiting {
		last := e.capOrder()[maxCapWaiting]
		delete(e.capq.waiting, last.id)
		e.logger.Warn("remediation: too many faults waiting behind the quarantine cap; forgetting the least severe, most recent (it acts with its next record)",
			zap.String("fault.id", last.id), zap.String("node", last.node), zap.Int("max", maxCapWaiting))
	}
	return w, true
}

// capForget drops fault id from the waiting faults. Callers hold e.mu.
func (e *remediationExporter) capForget(id string) {
	if _, ok := e.capq.waiting[id]; ok {
		delete(e.capq.waiting, id)
		e.recordCapWaiting()
	}
}

// capDecided notes the end of a quarantine decision about fault id that
// the cap did not refuse: acted, a dry run, or answered finally (a
// platform skip, the cooldown, nothing to do) ends its wait; a failure or
// the tripped breaker does not (it is still to be acted on). Callers hold
// e.mu.
func (e *remediationExporter) capDecided(id, outcome, rail string) {
	if rail == railQuarantineCap || rail == railBreaker || outcome == audit.DecisionFailed {
		return
	}
	e.capForget(id)
}

// restoreCapWaiting applies an audit entry of an earlier life, or a
// decision of another replica, to the waiting faults: a refusal by the cap
// waits (without its record: it acts with its next one; already notified),
// any later decision that ends a wait ends it. Callers hold e.mu.
func (e *remediationExporter) restoreCapWaiting(entry audit.Entry) {
	if entry.FaultID == "" {
		return
	}
	if entry.State == string(fault.StateResolved) {
		e.capForget(entry.FaultID)
		return
	}
	if entry.Step != stepQuarantine || entry.Platform != e.platformName() || entry.Platform == "" {
		return
	}
	switch {
	case entry.Decision == audit.DecisionSkipped && strings.HasPrefix(entry.Reason, capReasonPrefix):
		w, _ := e.capWait(entry.FaultID, entry.FaultType, entry.Severity, entry.Node, entry.Time)
		w.notified = true
		if entry.Time.Before(w.since) {
			w.since = entry.Time
		}
	case entry.Decision == audit.DecisionFailed || entry.Reason == reasonBreakerTripped:
	default:
		e.capForget(entry.FaultID)
	}
}

// capOrder is the waiting faults, most severe first, then oldest, then by
// id. Callers hold e.mu.
func (e *remediationExporter) capOrder() []*capWaiter {
	out := make([]*capWaiter, 0, len(e.capq.waiting))
	for _, w := range e.capq.waiting {
		out = append(out, w)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.severity != b.severity {
			return a.severity < b.severity // P1 < P2 ...
		}
		if !a.since.Equal(b.since) {
			return a.since.Before(b.since)
		}
		return a.id < b.id
	})
	return out
}

// capSeverities are the severities the waiting gauge is recorded for,
// each time: a severity whose faults all left reads 0, not its last value.
var capSeverities = []fault.Severity{fault.SeverityP1, fault.SeverityP2, fault.SeverityP3, fault.SeverityP4}

// recordCapWaiting records the waiting faults by severity, drops those
// past the fault state's retention, and keeps the cap watched while any
// wait. Callers hold e.mu.
func (e *remediationExporter) recordCapWaiting() {
	horizon := e.clock.Now().Add(-lifecycle.OpenRetention)
	counts := map[string]int64{}
	for id, w := range e.capq.waiting {
		if w.last.Before(horizon) {
			delete(e.capq.waiting, id)
			continue
		}
		counts[w.severity]++
	}
	for _, sev := range capSeverities {
		e.telemetry.RemediationQuarantineCapWaiting.Record(context.Background(), counts[string(sev)], metric.WithAttributeSet(attribute.NewSet(
			attribute.String(metadata.TelemetryAttrPlatform, e.platformName()),
			attribute.String(metadata.TelemetryAttrSeverity, string(sev)))))
	}
	if len(e.capq.waiting) > 0 {
		e.watchCap(capRetryInterval)
	}
}

// watchCap reads the cap again after d, unless a watch runs already.
// Callers hold e.mu.
func (e *remediationExporter) watchCap(d time.Duration) {
	if e.capq.watch != nil || e.platform == nil || e.cfg.DryRun {
		return
	}
	w := &releaseTimer{}
	w.stop = e.clock.AfterFunc(d, func() { e.pollCap(w) })
	e.capq.watch = w
}

// capRoomMaybe reads the cap again at once: a node was released or the
// breaker reset, so a waiting fault may act. Callers hold e.mu.
func (e *remediationExporter) capRoomMaybe() {
	if len(e.capq.waiting) == 0 {
		return
	}
	e.stopCapWatch()
	e.watchCap(0)
}

// stopCapWatch stops the cap's watch (at shutdown, or to run it sooner).
// Callers hold e.mu.
func (e *remediationExporter) stopCapWatch() {
	if e.capq.watch != nil {
		e.capq.watch.stop()
		e.capq.watch = nil
	}
}

// pollCap runs on the watch's timer: it acts on the waiting faults the cap
// now has room for, and watches on while any wait.
func (e *remediationExporter) pollCap(w *releaseTimer) {
	if !e.enter() {
		return
	}
	defer e.inFlight.Done()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.capq.watch != w {
		return // stopped meanwhile
	}
	e.capq.watch = nil
	ctx, cancel := context.WithTimeout(e.lifeCtx, capRetryInterval)
	defer cancel()
	e.retryCapWaiting(ctx)
	e.recordQuarantined() // and the waiting faults: watched on while any wait
}

// retryCapWaiting goes through the waiting faults, most severe first: it
// reads the platform for each (writing and auditing nothing) and stops at
// the first the cap still refuses, or when the breaker is tripped (its own
// alert pages; the faults wait on). A fault the cap has room for is acted
// on through the quarantine path, audited and shown to the console; one
// whose record is not here (restored) stops waiting and acts with its next
// record; one whose node is ours now, or that the platform would leave
// alone, stops waiting. Callers hold e.mu.
func (e *remediationExporter) retryCapWaiting(ctx context.Context) {
	if e.decisions != nil {
		// Another replica may have acted on, or seen resolved, a fault
		// restored from its decisions.
		if err := e.catchUp(ctx); err != nil {
			e.logger.Debug("remediation: decision log not read before retrying the quarantine cap", zap.Error(err))
		}
	}
	for _, w := range e.capOrder() {
		if ctx.Err() != nil {
			return
		}
		req := actuator.Request{Node: w.node, FaultID: w.id, FaultType: w.typ, Severity: w.severity}
		elig, err := timedCall(e, opCheck, func(ctx context.Context) (actuator.Eligibility, error) { return e.platform.Check(ctx, req) })(ctx)
		if err != nil {
			return // read again at the next watch
		}
		if elig.Skip == "" {
			if reason := e.overQuarantineCap(elig); reason != "" {
				if e.cfg.QuarantineCapTripsBreaker && !w.notified && w.rec.ID != "" {
					w.notified, _ = e.tripOnCap(ctx, w.rec, w.node, reason)
				}
				return // still full: the faults behind it wait too
			}
		}
		if w.rec.ID == "" || !e.leader.IsLeader() {
			// Nothing to act with here: it no longer waits behind the cap.
			if elig.Skip == "" && !elig.Ours {
				e.logger.Warn("remediation: the quarantine cap has room for a fault it refused before a restart or on another replica; its record is not here, so it acts with its next record (quarantine the node by hand if the fault is real)",
					zap.String("fault.id", w.id), zap.String("fault.type", w.typ), zap.String("node", w.node))
			}
			e.capForget(w.id)
			continue
		}
		if elig.Skip == "" {
			// The quarantine asks the breaker next: tripped, the faults
			// wait for its reset (its own alert pages).
			tripped, err := timedCall(e, opBreakerTripped, e.platform.Breaker().Tripped)(ctx)
			if err != nil || tripped {
				return
			}
		}
		e.actOnCapWaiter(ctx, w) // a platform skip is audited there, and ends the wait
	}
}

// actOnCapWaiter decides w's quarantine again, through the path of its
// first record, and shows the console the outcome. Callers hold e.mu.
func (e *remediationExporter) actOnCapWaiter(ctx context.Context, w *capWaiter) {
	var written []audit.Entry
	if e.console != nil && e.capture == nil {
		e.capture = &written
		defer func() {
			e.capture = nil
			e.recordToConsole(w.rec, written)
		}()
	}
	if _, _, _, err := e.quarantine(ctx, w.rec, w.d, w.node); err != nil {
		e.logger.Warn("remediation: acting on a fault that waited behind the quarantine cap failed; retried at the next watch",
			zap.String("fault.id", w.id), zap.String("node", w.node), zap.Error(err))
	}
}

// capView is the cap's state for the console; nil in a dry run or without
// a platform (the cap is not read). Callers hold e.mu.
func (e *remediationExporter) capView() *console.QuarantineCap {
	if e.cfg.DryRun || e.platform == nil {
		return nil
	}
	v := &console.QuarantineCap{Fraction: e.cfg.MaxQuarantinedFraction, GPUNodes: e.capq.gpuNodes, Held: e.capq.held,
		ReadAt: e.capq.readAt, TripsBreaker: e.cfg.QuarantineCapTripsBreaker, Waiting: []console.CapWaiting{}}
	if !e.capq.readAt.IsZero() {
		v.Limit = quarantineCap(e.cfg.MaxQuarantinedFraction, e.capq.gpuNodes)
	}
	for _, w := range e.capOrder() {
		v.Waiting = append(v.Waiting, console.CapWaiting{FaultID: w.id, Type: w.typ, Severity: w.severity, Node: w.node,
			Since: w.since, Last: w.last})
	}
	return v
}
