package remediationexporter // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter"

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/audit"
	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/console"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

// Audit steps of the breaker's events and of the console's
// acknowledgements (README.md, "Fault console").
const (
	stepBreaker     = "breaker"
	stepAcknowledge = "acknowledge"
)

// Breaker events, as the audit's event and the console's history name them.
const (
	breakerEventTripped = "tripped"
	breakerEventReset   = "reset"
)

const (
	// actionBreakerReset counts a reset asked through the console among
	// the decisions.
	actionBreakerReset = "breaker_reset"
	// opBreakerReset and opBreakerState are the breaker's console calls.
	opBreakerReset = "breaker_reset"
	opBreakerState = "breaker_state"
	// maxBreakerHistory bounds the breaker events kept for the console.
	maxBreakerHistory = 64
	// maxRecentFaults bounds the fault ids remembered for acknowledgements
	// beyond the lifecycle state (records skipped on a follower).
	maxRecentFaults = 10_000
)

// consoleController is the exporter as the fault console's Controller.
// Every method takes e.mu as a decision does and refuses once the
// exporter shuts down.
type consoleController struct {
	e *remediationExporter
}

var _ console.Controller = (*consoleController)(nil)

// recentFault is what an acknowledgement's audit entry names of a fault.
type recentFault struct {
	typ, severity, state, node string
}

// call runs fn as a console call: one decision like a record's
// (serialised).
func (c *consoleController) call(ctx context.Context, fn func(ctx context.Context) error) error {
	return c.e.serialised(ctx, fn)
}

// Quarantined implements console.Controller: the nodes the lifecycle state
// holds (in a dry run, the nodes it would hold).
func (c *consoleController) Quarantined(ctx context.Context) ([]console.QuarantinedNode, error) {
	var out []console.QuarantinedNode
	err := c.call(ctx, func(context.Context) error {
		hs := c.e.state.Holdings()
		out = make([]console.QuarantinedNode, len(hs))
		for i, h := range hs {
			out[i] = console.QuarantinedNode{Node: h.Node, FaultIDs: h.FaultIDs, Actions: actionNames(h.Actions),
				Reason: h.Reason, Since: h.Since, ReleasePending: h.ReleasePending, Lifecycle: lifecycleView(h.Repair)}
		}
		return nil
	})
	return out, err
}

// Breaker implements console.Controller: the platform's breaker as read
// now, and the trips and resets this exporter saw. A dry run, or no
// platform, reads nothing (Budget 0: unknown).
func (c *consoleController) Breaker(ctx context.Context) (console.Breaker, error) {
	var out console.Breaker
	err := c.call(ctx, func(ctx context.Context) error {
		e := c.e
		out.History = slices.Clone(e.breakerHistory)
		out.Tripped = e.breakerKnownTripped
		out.QuarantineCap = e.capView()
		if e.cfg.DryRun || e.platform == nil {
			return nil
		}
		st, err := timedCall(e, opBreakerState, func(ctx context.Context) (actuator.BreakerState, error) {
			return e.platform.Breaker().State(ctx, e.clock.Now())
		})(ctx)
		if err != nil {
			return fmt.Errorf("remediationexporter: breaker: %w", err)
		}
		e.breakerRead(st.Tripped, st.Detail)
		out.History = slices.Clone(e.breakerHistory)
		out.Tripped, out.Used, out.Budget, out.Window = st.Tripped, st.Used, st.Budget, st.Window
		return nil
	})
	return out, err
}

// ResetBreaker implements console.Controller: the platform breaker's
// Reset, by the leader, once it is tripped; audited (step breaker, event
// reset, the operator) before it returns and counted as a decision with
// action breaker_reset. A dry run audits what it would do and calls
// nothing.
func (c *consoleController) ResetBreaker(ctx context.Context, op console.Operator) error {
	return c.call(ctx, func(ctx context.Context) error {
		e := c.e
		entry := withOperator(audit.Entry{Step: stepBreaker, Event: breakerEventReset, Platform: e.platformName()}, op)
		refuse := func(outcome string, err error) error {
			e.record(withDecision(entry, audit.DecisionSkipped, err.Error()))
			e.countDecision(ctx, actionBreakerReset, outcome, "")
			return err
		}
		if err := e.notOwner(); err != nil {
			return e.refuseControl(entry, actionBreakerReset, err)
		}
		if e.cfg.DryRun {
			platform := e.platformName()
			if platform == "" {
				platform = "no platform configured"
			}
			e.record(withDecision(entry, audit.DecisionDryRun, "would call Reset on the breaker of "+platform))
			e.countDecision(ctx, actionBreakerReset, outcomeDryRun, "")
			return nil
		}
		if e.platform == nil {
			return refuse(outcomeSkipped, errors.New("remediationexporter: no platform configured: there is no breaker to reset"))
		}
		breaker := e.platform.Breaker()
		tripped, err := timedCall(e, opBreakerTripped, breaker.Tripped)(ctx)
		if err == nil && !tripped {
			e.breakerRead(false, "")
			return refuse(outcomeSkipped, errors.New("remediationexporter: the breaker is not tripped: nothing to reset"))
		}
		if err == nil {
			_, _, err = retryCall(ctx, e, timedCall(e, opBreakerReset, func(ctx context.Context) (struct{}, error) { return struct{}{}, breaker.Reset(ctx) }))
		}
		if err != nil {
			e.record(withDecision(entry, audit.DecisionFailed, err.Error()))
			e.countDecision(ctx, actionBreakerReset, outcomeFailed, "")
			return fmt.Errorf("remediationexporter: breaker reset: %w", err)
		}
		e.record(withDecision(entry, audit.DecisionActed, "breaker reset: quarantining resumes"))
		e.countDecision(ctx, actionBreakerReset, outcomeActed, "")
		e.noteBreakerEvent(breakerEventReset, op.Name, op.Reason, e.clock.Now())
		e.breakerKnownTripped = false
		e.recordBreaker(ctx, false)
		// Act again: the next trip pages again, and the watch of the
		// tripped breaker has nothing left to watch.
		e.breakerAlerted = false
		if e.breakerWatch != nil {
			e.breakerWatch.stop()
			e.breakerWatch = nil
		}
		e.capRoomMaybe() // faults waiting behind the quarantine cap may act
		return nil
	})
}

// Release implements console.Controller: a human's release of a node this
// exporter holds, through releaseNode, the path of the automatic release;
// every fault it holds the node for goes with it, and a pending
// verification window ends with it.
func (c *consoleController) Release(ctx context.Context, node string, op console.Operator) (string, error) {
	var detail string
	err := c.call(ctx, func(ctx context.Context) error {
		e := c.e
		if err := e.notOwner(); err != nil {
			// Before the state is touched: a standby's view of the node
			// (restored from the decision log) stays as it is.
			return e.refuseControl(withOperator(audit.Entry{Step: stepRelease, Node: node, Platform: e.platformName()}, op), actionRelease, err)
		}
		rel, ok := e.state.BeginManualRelease(node)
		if !ok {
			return fmt.Errorf("node %q is not quarantined by this exporter", node)
		}
		defer e.recordQuarantined()
		entry := withOperator(audit.Entry{Step: stepRelease, Node: node, Platform: e.platformName(),
			Actions: actionNames(rel.Actions), FaultID: strings.Join(rel.FaultIDs, ",")}, op)
		why := "released through the fault console by " + operatorName(op)
		if op.Reason != "" {
			why += ": " + op.Reason
		}
		released, d, err := e.releaseNode(ctx, rel, entry, why)
		if err != nil {
			return err
		}
		if released {
			if window := e.releaseTimers[node]; window != nil {
				window.stop()
				delete(e.releaseTimers, node)
			}
			e.state.CancelRelease(node)
		}
		detail = d
		return nil
	})
	return detail, err
}

// Role implements console.Controller.
func (c *consoleController) Role() console.Role { return c.e.role() }

// Acknowledge implements console.Controller: an audit entry (step
// acknowledge) naming the operator, by the replica that acts (the owner's
// console shows acknowledgements); nothing else changes.
func (c *consoleController) Acknowledge(ctx context.Context, faultID string, op console.Operator) error {
	return c.call(ctx, func(context.Context) error {
		e := c.e
		if err := e.notOwner(); err != nil {
			return e.refuseControl(withOperator(audit.Entry{Step: stepAcknowledge, FaultID: faultID}, op), "", err)
		}
		rf, known := e.recentFaults.byID[faultID]
		if !known && !e.state.HasFault(faultID) {
			return fmt.Errorf("fault %q is unknown to this exporter", faultID)
		}
		entry := withOperator(audit.Entry{Step: stepAcknowledge, FaultID: faultID, FaultType: rf.typ, Severity: rf.severity,
			State: rf.state, Node: rf.node}, op)
		e.record(withDecision(entry, audit.DecisionActed, "acknowledged by "+operatorName(op)))
		return nil
	})
}

func withOperator(entry audit.Entry, op console.Operator) audit.Entry {
	entry.Operator, entry.OperatorRemote, entry.OperatorReason = operatorName(op), op.Remote, op.Reason
	entry.OperatorVia, entry.OperatorForwardedFor = op.Via, op.ForwardedFor
	return entry
}

// operatorName is the operator's declared name; "unnamed operator" when it
// declared none, so the audit never reads as the exporter's own decision.
func operatorName(op console.Operator) string {
	if op.Name == "" {
		return "unnamed operator"
	}
	return op.Name
}

// breakerRead notes the breaker's state as just read: a change from what
// the exporter last knew is an event of its history, audited (a trip by
// another replica, a reset outside the console). Callers hold e.mu.
func (e *remediationExporter) breakerRead(tripped bool, detail string) {
	if tripped == e.breakerKnownTripped {
		return
	}
	e.breakerKnownTripped = tripped
	entry := audit.Entry{Step: stepBreaker, Platform: e.platformName()}
	if tripped {
		entry.Event = breakerEventTripped
		reason := "circuit breaker read tripped: quarantining stopped until a human resets it"
		if detail != "" {
			reason += " (" + detail + ")"
		}
		e.record(withDecision(entry, audit.DecisionActed, reason))
		e.noteBreakerEvent(breakerEventTripped, "", reason, e.clock.Now())
		return
	}
	entry.Event = breakerEventReset
	reason := "circuit breaker read closed: reset outside this exporter"
	e.record(withDecision(entry, audit.DecisionActed, reason))
	e.noteBreakerEvent(breakerEventReset, "", reason, e.clock.Now())
}

// breakerTrippedHere notes the trip this exporter's admission of node
// caused. Callers hold e.mu.
func (e *remediationExporter) breakerTrippedHere(node string) {
	e.breakerKnownTripped = true
	reason := "circuit breaker tripped: admitting " + node + " would exceed the budget; quarantining stopped until a human resets it"
	e.record(withDecision(audit.Entry{Step: stepBreaker, Event: breakerEventTripped, Platform: e.platformName(), Node: node},
		audit.DecisionActed, reason))
	e.noteBreakerEvent(breakerEventTripped, "", reason, e.clock.Now())
}

// noteBreakerEvent appends to the breaker's bounded history.
func (e *remediationExporter) noteBreakerEvent(event, by, reason string, at time.Time) {
	if len(e.breakerHistory) >= maxBreakerHistory {
		e.breakerHistory = slices.Delete(e.breakerHistory, 0, len(e.breakerHistory)-maxBreakerHistory+1)
	}
	e.breakerHistory = append(e.breakerHistory, console.BreakerEvent{Time: at.UTC(), Event: event, By: by, Reason: reason})
}

// restoreBreakerEvent replays a breaker entry of an earlier life (or
// another replica's decision) into the history. Callers hold e.mu.
func (e *remediationExporter) restoreBreakerEvent(entry audit.Entry) {
	if entry.Decision != audit.DecisionActed || (entry.Event != breakerEventTripped && entry.Event != breakerEventReset) {
		return
	}
	reason := entry.Reason
	if entry.OperatorReason != "" {
		reason = entry.OperatorReason
	}
	e.noteBreakerEvent(entry.Event, entry.Operator, reason, entry.Time)
	e.breakerKnownTripped = entry.Event == breakerEventTripped
}

// rememberFault keeps a fault's id for acknowledgements, bounded. Callers
// hold e.mu.
func (e *remediationExporter) rememberFault(r fault.Record) {
	e.recentFaults.put(r.ID, recentFault{typ: r.IDType(), severity: string(r.Severity), state: string(r.State), node: nodeOf(r)})
}

// recordToConsole shows the console a decided record and what the
// exporter did about it: entries are the audit entries its decision wrote.
// Callers hold e.mu.
func (e *remediationExporter) recordToConsole(r fault.Record, entries []audit.Entry) {
	e.rememberFault(r)
	f := console.Fault{ID: r.ID, Type: r.IDType(), Severity: string(r.Severity), State: console.StateOpen,
		Node: nodeOf(r), GPU: r.GPUUUID, Job: r.JobID, Rank: -1, Step: -1,
		FirstSeen: r.FirstSeen, LastSeen: r.LastSeen, Summary: r.Summary, Evidence: evidenceMap(r.Evidence)}
	if r.State == fault.StateResolved {
		f.State = console.StateResolved
	}
	if r.RankKnown {
		f.Rank = r.Rank
	}
	// A fault record names no attempt nor step (docs/fault-record.md): the
	// step it cites is the trace of its first evidence from a span, whose
	// id is the contract's (steprecord.TraceID, written by the stepspan and
	// straggler processors), as the record's own TraceId.
	for _, ev := range r.Evidence {
		if !ev.TraceID.IsEmpty() {
			f.TraceID = ev.TraceID.String()
			break
		}
	}
	f.Decision, f.Action, f.Reason = summarise(entries)
	e.console.RecordFault(f)
}

// evidenceMap is the record's evidence as signal → value: the text of a
// text signal, else the number; a signal read more than once keeps its
// newest reading.
func evidenceMap(evs []fault.Evidence) map[string]string {
	if len(evs) == 0 {
		return nil
	}
	out := make(map[string]string, len(evs))
	newest := make(map[string]int, len(evs))
	for i, ev := range evs {
		if j, ok := newest[ev.Signal]; ok && evs[j].Time.After(ev.Time) {
			continue
		}
		newest[ev.Signal] = i
		if ev.Text != "" {
			out[ev.Signal] = ev.Text
		} else {
			out[ev.Signal] = strconv.FormatFloat(ev.Value, 'g', -1, 64)
		}
	}
	return out
}

// decisionRank orders the audit's decisions by what the console shows
// first: a failure, then an action, then a dry run, then a skip.
var decisionRank = map[string]int{audit.DecisionSkipped: 1, audit.DecisionDryRun: 2, audit.DecisionActed: 3, audit.DecisionFailed: 4}

// summarise is what a record's audit entries say the exporter did: the
// weightiest decision among them, the actions of its entries (node
// actions, "release", "webhook") and their reasons. A breaker event is not
// the record's decision.
func summarise(entries []audit.Entry) (decision, action, reason string) {
	best := 0
	for _, en := range entries {
		if r := decisionRank[en.Decision]; r > best && en.Step != stepBreaker {
			best, decision = r, en.Decision
		}
	}
	if decision == "" {
		return audit.DecisionSkipped, "", "nothing to do for this record"
	}
	var actions, reasons []string
	add := func(list []string, v string) []string {
		if v == "" || slices.Contains(list, v) {
			return list
		}
		return append(list, v)
	}
	for _, en := range entries {
		if en.Decision != decision || en.Step == stepBreaker {
			continue
		}
		reason := en.Reason
		switch en.Step {
		case stepWebhook:
			actions = add(actions, "webhook")
			// The webhook entry's reason holds the whole payload: the
			// console says what happened, the audit file keeps the rest.
			reason = "webhook " + en.Decision
			if en.Outcome != "" {
				reason += ": " + en.Outcome
			}
		case stepRelease:
			actions = add(actions, "release")
		default:
			for _, a := range en.Actions {
				actions = add(actions, a)
			}
		}
		reasons = add(reasons, clip(reason, maxConsoleReason))
	}
	return decision, strings.Join(actions, ","), strings.Join(reasons, "; ")
}

// maxConsoleReason bounds one audit reason as the console shows it.
const maxConsoleReason = 300

// clip shortens s to at most n bytes, on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
