package lifecycle

import (
	"slices"
	"sort"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
)

// Bounds of one node's repair loop: the steps it remembers and the faults
// it gathers (the evidence bundle's records). A loop climbs a ladder of a
// few repairs, so neither is reached in practice; past them the oldest go.
const (
	MaxRepairHistory = 64
	MaxRepairFaults  = 16
)

// Refs a loop's audit entries carry besides a boot id: the node's agent
// confirmed the fault from its own signals (the first repair may go), or
// did not (the loop ends; the node waits for a human).
const (
	RefConfirmed   = "confirmed"
	RefUnconfirmed = "unconfirmed"
)

// RailRepair keeps a node in its repair loop: only a passed verification
// (or a human) returns it, not its faults' resolution.
const RailRepair = "repair"

// RepairPlan is what a node's repair loop runs, from the fault that
// started it and its policy rule.
type RepairPlan struct {
	FaultID   string
	FaultType string
	GPUUUID   string // the fault's GPU ("" : the node's)
	Rule      string
	// Ladder is the repairs to try, mildest first; rma ends it.
	Ladder []repair.Action
	Checks []repair.CheckSpec
	// Onset is the fault's first signal (the record's first_seen).
	Onset time.Time
}

// StepEvent is one step a loop entered.
type StepEvent struct {
	Step    repair.Step
	At      time.Time
	Detail  string
	Action  repair.Action
	Attempt int
}

// Loop is one node's repair loop. A copy: changing it changes nothing.
type Loop struct {
	Node string
	RepairPlan
	// Step is where the node is, entered at Since.
	Step  repair.Step
	Since time.Time
	// Action is the repair the loop is at (to request in StepDrained, in
	// flight in StepRepairing, verified after it) and Attempt its place in
	// the ladder (1 for the first); ActionRMA once past it.
	Action  repair.Action
	Attempt int
	// Ref lets a restarted exporter resume the repair in flight: the
	// node's boot id before a reboot.
	Ref string
	// History is every step entered, oldest first (bounded).
	History []StepEvent
	// Results are the last verification's; Verifications every one's,
	// oldest first (bounded).
	Results       []repair.CheckResult
	Verifications []Verification
	// Confirmed: the node's agent confirmed the fault from its own signals
	// (asked before the first repair).
	Confirmed bool
	// FaultIDs are the faults of ours the loop is for, the plan's first.
	FaultIDs []string
}

// Verification is one verification's outcome.
type Verification struct {
	At      time.Time
	Passed  bool
	Results []repair.CheckResult
}

// nextSteps are the moves the loop allows: forward, back to drained with
// the next repair (a failed repair or verification), on to rma past the
// ladder, and quarantined to itself with the next repair (the node did not
// drain for the first).
var nextSteps = map[repair.Step][]repair.Step{
	repair.StepQuarantined: {repair.StepQuarantined, repair.StepDrained, repair.StepRMA},
	repair.StepDrained:     {repair.StepRepairing, repair.StepDrained, repair.StepRMA},
	repair.StepRepairing:   {repair.StepRepaired, repair.StepDrained, repair.StepRMA},
	repair.StepRepaired:    {repair.StepVerifying, repair.StepDrained, repair.StepRMA},
	repair.StepVerifying:   {repair.StepVerified, repair.StepDrained, repair.StepRMA},
	repair.StepVerified:    {repair.StepReleased},
}

// StartRepair starts node's repair loop for plan at now: onset (the
// plan's), recorded and quarantined, in StepQuarantined with the ladder's
// first repair. The node must be held by the exporter for plan's fault.
// On a node already in a loop, the fault joins it (its record goes into
// the evidence) and false is returned; so it is on a node not held or an
// empty ladder.
func (s *State) StartRepair(node string, plan RepairPlan, now time.Time) (Loop, bool) {
	n := s.nodes[node]
	if n == nil || len(plan.Ladder) == 0 {
		return Loop{}, false
	}
	if _, ours := n.ourFaults[plan.FaultID]; !ours {
		return Loop{}, false
	}
	if l := n.repair; l != nil {
		if !slices.Contains(l.FaultIDs, plan.FaultID) {
			l.FaultIDs = bounded(append(l.FaultIDs, plan.FaultID), MaxRepairFaults)
		}
		return Loop{}, false
	}
	l := &Loop{Node: node, RepairPlan: clonePlan(plan), Action: plan.Ladder[0], Attempt: 1, FaultIDs: []string{plan.FaultID}}
	if !plan.Onset.IsZero() {
		l.enter(repair.StepOnset, plan.Onset, "")
	}
	l.enter(repair.StepRecorded, now, "")
	l.enter(repair.StepQuarantined, now, "")
	n.repair = l
	return l.copy(), true
}

// RepairLoop returns node's loop; false when it has none.
func (s *State) RepairLoop(node string) (Loop, bool) {
	if n := s.nodes[node]; n != nil && n.repair != nil {
		return n.repair.copy(), true
	}
	return Loop{}, false
}

// RepairLoops lists the loops, by node.
func (s *State) RepairLoops() []Loop {
	var out []Loop
	for _, n := range s.nodes {
		if n.repair != nil {
			out = append(out, n.repair.copy())
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out
}

// RepairSteps counts the loops in each step.
func (s *State) RepairSteps() map[repair.Step]int {
	out := map[repair.Step]int{}
	for _, n := range s.nodes {
		if n.repair != nil {
			out[n.repair.Step]++
		}
	}
	return out
}

// AdvanceRepair moves node's loop to step `to` at now. It returns the step
// left and how long the loop was in it; false (and no change) when the
// node has no loop or the loop cannot move there.
func (s *State) AdvanceRepair(node string, to repair.Step, now time.Time, detail string) (left repair.Step, spent time.Duration, ok bool) {
	n := s.nodes[node]
	if n == nil || n.repair == nil || !slices.Contains(nextSteps[n.repair.Step], to) {
		return "", 0, false
	}
	l := n.repair
	left, spent = l.Step, now.Sub(l.Since)
	l.enter(to, now, detail)
	if to == repair.StepReleased {
		n.repair = nil
	}
	return left, spent, true
}

// EscalateRepair moves node's loop to the ladder's next repair at now,
// after the current one failed (why): back to StepDrained (StepQuarantined
// when the node never drained), or, past the ladder, to StepRMA, where the
// node waits for a human (its hold). It returns the step entered, the one
// left and the time spent there.
func (s *State) EscalateRepair(node string, now time.Time, why string) (to, left repair.Step, spent time.Duration, ok bool) {
	n := s.nodes[node]
	if n == nil || n.repair == nil || n.repair.Step == repair.StepRMA || n.repair.Step == repair.StepVerified {
		return "", "", 0, false
	}
	l := n.repair
	left, spent = l.Step, now.Sub(l.Since)
	l.Ref = ""
	switch {
	case l.Attempt < len(l.Ladder):
		l.Attempt++
		l.Action = l.Ladder[l.Attempt-1]
		to = repair.StepDrained
		if l.Step == repair.StepQuarantined {
			to = repair.StepQuarantined
		}
		why += ": next repair " + string(l.Action)
	default:
		l.Action, to = repair.ActionRMA, repair.StepRMA
		if n.hold == "" {
			n.hold = "RMA review: every repair failed (fault " + l.FaultID + ")"
		}
	}
	l.enter(to, now, why)
	return to, left, spent, true
}

// SetRepairRef keeps ref (the boot id before a reboot) with node's loop.
func (s *State) SetRepairRef(node, ref string) {
	if n := s.nodes[node]; n != nil && n.repair != nil {
		n.repair.Ref = ref
	}
}

// SetVerification keeps a verification's results (at `at`) with node's
// loop.
func (s *State) SetVerification(node string, passed bool, results []repair.CheckResult, at time.Time) {
	if n := s.nodes[node]; n != nil && n.repair != nil {
		n.repair.verified(passed, results, at)
	}
}

func (l *Loop) verified(passed bool, results []repair.CheckResult, at time.Time) {
	l.Results = slices.Clone(results)
	l.Verifications = bounded(append(l.Verifications, Verification{At: at, Passed: passed, Results: slices.Clone(results)}), MaxRepairHistory)
}

// ConfirmRepair records that node's agent confirmed the fault.
func (s *State) ConfirmRepair(node string) {
	if n := s.nodes[node]; n != nil && n.repair != nil {
		n.repair.Confirmed = true
	}
}

// HoldUnconfirmed ends node's loop without a repair: the node's agent did
// not confirm the fault (why), so nothing is repaired and the node waits
// for a human, quarantined.
func (s *State) HoldUnconfirmed(node, why string) {
	n := s.nodes[node]
	if n == nil || n.repair == nil {
		return
	}
	if n.hold == "" {
		n.hold = "the node's agent did not confirm fault " + n.repair.FaultID + ": " + why
	}
	n.repair = nil
}

// RestoreRepair replays one audited step of node's loop (an earlier life's
// entry at `at`): it creates the loop when missing (the ladder and checks
// from the entry, else the action alone), and enters step with action and
// attempt. ref and results, when set, are kept. A released loop is
// forgotten; a loop in rma holds the node for a human.
func (s *State) RestoreRepair(node string, plan RepairPlan, step repair.Step, action repair.Action, attempt int,
	ref string, results []repair.CheckResult, at time.Time, detail string) {
	n := s.node(node)
	if n.repair == nil {
		if step == repair.StepReleased || ref == RefUnconfirmed {
			return
		}
		if len(plan.Ladder) == 0 && action != "" && action != repair.ActionRMA {
			plan.Ladder = []repair.Action{action}
		}
		n.repair = &Loop{Node: node, RepairPlan: clonePlan(plan), FaultIDs: []string{plan.FaultID}}
	}
	l := n.repair
	if plan.FaultID != "" && !slices.Contains(l.FaultIDs, plan.FaultID) {
		l.FaultIDs = bounded(append(l.FaultIDs, plan.FaultID), MaxRepairFaults)
	}
	if step == repair.StepOnset && !at.IsZero() {
		l.Onset = at
	}
	if action != "" {
		l.Action, l.Attempt = action, attempt
	}
	switch ref {
	case RefConfirmed:
		l.Confirmed = true
		return
	case RefUnconfirmed:
		s.HoldUnconfirmed(node, detail)
		return
	case "":
	default:
		l.Ref = ref
	}
	if len(results) > 0 {
		l.verified(step == repair.StepVerified, results, at)
	}
	if step == repair.StepRMA && l.Step == repair.StepRMA {
		return // the RMA request's own entry (ref kept above)
	}
	if step == repair.StepOnset || step == repair.StepRecorded {
		// Before the quarantine: history only. A loop whose quarantined
		// entry was lost (a crash between the lines) is where it starts.
		l.History = bounded(append(l.History, StepEvent{Step: step, At: at, Detail: detail, Action: l.Action, Attempt: l.Attempt}), MaxRepairHistory)
		if l.Step == "" {
			l.Step, l.Since = repair.StepQuarantined, at
		}
		return
	}
	l.enter(step, at, detail)
	switch step {
	case repair.StepReleased:
		n.repair = nil
	case repair.StepRMA:
		if n.hold == "" {
			n.hold = "RMA review: every repair failed (fault " + l.FaultID + ")"
		}
	}
}

func (l *Loop) enter(step repair.Step, at time.Time, detail string) {
	l.Step, l.Since = step, at
	l.History = bounded(append(l.History, StepEvent{Step: step, At: at, Detail: detail, Action: l.Action, Attempt: l.Attempt}), MaxRepairHistory)
}

func (l *Loop) copy() Loop {
	c := *l
	c.RepairPlan = clonePlan(l.RepairPlan)
	c.History = slices.Clone(l.History)
	c.Results = slices.Clone(l.Results)
	c.Verifications = slices.Clone(l.Verifications)
	c.FaultIDs = slices.Clone(l.FaultIDs)
	return c
}

func clonePlan(p RepairPlan) RepairPlan {
	p.Ladder = slices.Clone(p.Ladder)
	p.Checks = slices.Clone(p.Checks)
	return p
}

// bounded keeps the last max items of s.
func bounded[T any](s []T, max int) []T {
	if len(s) <= max {
		return s
	}
	return slices.Clone(s[len(s)-max:])
}
