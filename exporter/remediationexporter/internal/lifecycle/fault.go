package lifecycle

import (
	"fmt"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

// Open records an open or update record of fault id at now: node is the
// node it names (kept from the first record), returnToService whether the
// policy lets the fault return its node to service. It returns false for a
// fault already resolved: a late or out-of-order record, which does
// nothing.
func (s *State) Open(id, node string, returnToService bool, now time.Time) bool {
	fs := s.faults[id]
	if fs != nil && fs.resolved {
		return false
	}
	if fs == nil {
		fs = &faultState{node: node}
		s.faults[id] = fs
	}
	fs.lastRecord = now
	fs.release = returnToService
	return true
}

// QuarantinePlan is what a quarantine for a fault may apply.
type QuarantinePlan struct {
	// Actions are the policy's actions not yet applied for the fault; on a
	// duplicate, all the policy's actions (for the audit).
	Actions []actuator.Action
	// Skip says why nothing is applied; "" means apply Actions.
	Skip string
	// Rail names the rail behind Skip when one refused the quarantine
	// (cooldown); "" for a skip with nothing to do (a duplicate, no node).
	Rail string
}

// PlanQuarantine decides which of want (the policy's node actions for the
// platform) to apply to node for fault id at now.
func (s *State) PlanQuarantine(id, node string, want []actuator.Action, now time.Time) QuarantinePlan {
	var applied []actuator.Action
	if fs := s.faults[id]; fs != nil {
		applied = fs.applied
	}
	toApply := missing(want, applied)
	switch {
	case len(toApply) == 0:
		// One fault id acts once: a duplicate, a redelivery or an update
		// that asks for nothing new.
		return QuarantinePlan{Actions: want, Skip: "duplicate: fault already acted on"}
	case node == "":
		return QuarantinePlan{Actions: toApply, Skip: "the record names no node"}
	}
	n := s.node(node)
	if len(n.actions) == 0 && !n.lastRelease.IsZero() && now.Sub(n.lastRelease) < s.cooldown {
		return QuarantinePlan{Actions: toApply, Rail: RailCooldown, Skip: fmt.Sprintf("cooldown: returned to service %s ago (cooldown %s)",
			now.Sub(n.lastRelease).Round(time.Second), s.cooldown)}
	}
	return QuarantinePlan{Actions: toApply}
}

// Quarantined records the platform's final answer about actions on node for
// fault id: they are applied for the fault and not asked for again. held
// says the exporter holds them on the node (applied, already done by it,
// or logged in a dry run), so the fault is ours and the node returns to
// service only through Resolve. holdReason, when set, keeps the node for a
// human.
func (s *State) Quarantined(id, node string, actions []actuator.Action, held bool, holdReason string) {
	fs := s.faults[id]
	if fs == nil {
		fs = &faultState{node: node}
		s.faults[id] = fs
	}
	fs.applied = addActions(fs.applied, actions)
	if !held {
		return
	}
	n := s.node(node)
	fs.ours = true
	if len(n.ourFaults) == 0 {
		n.since = fs.lastRecord
	}
	n.ourFaults[id] = struct{}{}
	n.actions = addActions(n.actions, actions)
	if holdReason != "" && n.hold == "" {
		n.hold = holdReason + " (fault " + id + ")"
	}
}

// WebhookDue reports whether fault id needs a webhook at severity sev: the
// first one, or one for a higher severity (the route changes).
func (s *State) WebhookDue(id string, sev fault.Severity) bool {
	fs := s.faults[id]
	return fs == nil || !fs.webhooked || higher(sev, fs.severity)
}

// WebhookSent records the webhook for fault id at severity sev.
func (s *State) WebhookSent(id string, sev fault.Severity) {
	if fs := s.faults[id]; fs != nil {
		fs.webhooked, fs.severity = true, sev
	}
}

// higher reports whether a is a more urgent severity than b (P1 < P2 ...).
func higher(a, b fault.Severity) bool { return a < b }
