package remediationexporter // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter"

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/audit"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/lifecycle"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
)

// stepLoop advances l by one step if it can; it reports whether it moved.
// Callers hold e.mu.
func (e *remediationExporter) stepLoop(ctx context.Context, l lifecycle.Loop) bool {
	switch l.Step {
	case repair.StepQuarantined:
		ok, detail := e.repairDrained(ctx, l)
		if ok {
			return e.advance(ctx, l, repair.StepDrained, detail, nil)
		}
		return e.waitOrTimeout(ctx, l, detail)
	case repair.StepDrained:
		return e.requestRepair(ctx, l)
	case repair.StepRepairing:
		return e.pollRepair(ctx, l)
	case repair.StepRepaired:
		return e.requestVerify(ctx, l)
	case repair.StepVerifying:
		return e.pollVerify(ctx, l)
	case repair.StepVerified:
		return e.releaseVerified(ctx, l)
	}
	if l.Step == repair.StepRMA && l.Ref != rmaRequested {
		e.requestRMA(ctx, l) // its post failed: again
	}
	return false // rma: a human decides (the console's release)
}

// repairPath is what carries out l's repair: "platform" (its Repairer
// carries the action), "agent" (a GPU reset), "webhook" (a reboot through
// the maintenance webhook), or "" (nothing can).
func (e *remediationExporter) repairPath(a repair.Action) string {
	if r := e.repairer(); r != nil && slices.Contains(r.Repairs(), a) {
		return "platform"
	}
	switch {
	case a == repair.ActionGPUReset && e.agent != nil:
		return "agent"
	case a == repair.ActionReboot && e.webhook != nil:
		return "webhook"
	}
	return ""
}

// repairDrained reports whether l's node drained for its repair: the
// platform says no workload is left, or, for a GPU reset, the agent says
// the fault's GPU is idle (for a reboot, every GPU). detail says what was
// read, or what still runs.
func (e *remediationExporter) repairDrained(ctx context.Context, l lifecycle.Loop) (bool, string) {
	if e.cfg.DryRun {
		return true, "dry run: would wait until the node drained"
	}
	var why []string
	if r := e.repairer(); r != nil {
		drained, detail, err := r.Drained(ctx, l.Node)
		switch {
		case err != nil:
			why = append(why, "platform: "+err.Error())
		case drained:
			return true, "platform: drained " + detail
		default:
			why = append(why, "platform: not drained: "+detail)
		}
	}
	if e.agent != nil {
		st, err := e.agent.NodeStatus(ctx, l.Node)
		if err != nil {
			why = append(why, "agent: "+err.Error())
		} else if busy := busyGPUs(st, l); busy == "" {
			return true, "agent: " + idleWhat(l) + " idle"
		} else {
			why = append(why, "agent: busy: "+busy)
		}
	}
	if len(why) == 0 {
		return false, "nothing tells whether the node drained (no platform repairer, no agent)"
	}
	return false, strings.Join(why, "; ")
}

func idleWhat(l lifecycle.Loop) string {
	if l.Action == repair.ActionGPUReset && l.GPUUUID != "" {
		return "GPU " + l.GPUUUID
	}
	return "every GPU"
}

// busyGPUs says which of the GPUs l's repair needs idle are busy ("":
// none). A GPU reset needs the fault's GPU, which the agent must know
// (fail closed); anything else needs every GPU.
func busyGPUs(st repair.NodeStatus, l lifecycle.Loop) string {
	var busy []string
	found := false
	for _, g := range st.GPUs {
		if l.Action == repair.ActionGPUReset && l.GPUUUID != "" && g.UUID != l.GPUUUID {
			continue
		}
		found = true
		if g.Busy {
			busy = append(busy, g.UUID+" ("+g.Why+")")
		}
	}
	if !found {
		return "the agent reports no such GPU"
	}
	return strings.Join(busy, ", ")
}

// repairID is the idempotency key of l's repair request (the agent's job
// id): the same fault, action and attempt is the same request.
func repairID(l lifecycle.Loop) string {
	return fmt.Sprintf("%s-%s-%d", l.FaultID, l.Action, l.Attempt)
}

func verifyID(l lifecycle.Loop) string {
	return fmt.Sprintf("%s-verify-%d", l.FaultID, l.Attempt)
}

// requestRepair asks for l's repair through its rails: the replica that
// acts, on a node it holds (the loop exists only for those), dry run, the
// GPU idle (a reset), the repair breaker (refunded when the request is not
// carried out), audited. Callers hold e.mu.
func (e *remediationExporter) requestRepair(ctx context.Context, l lifecycle.Loop) bool {
	path := e.repairPath(l.Action)
	what := describeRepair(l, path, e.platformName())
	entry := e.repairEntry(l, repair.StepRepairing)
	if e.cfg.DryRun {
		e.countRepair(ctx, l.Action, outcomeDryRun)
		if !l.Confirmed && e.cfg.Repair.RequireConfirmation {
			what += ", once its agent confirmed the fault"
		}
		return e.advance(ctx, l, repair.StepRepairing, "would "+what, nil)
	}
	if path == "" {
		e.countRepair(ctx, l.Action, outcomeSkipped)
		return e.escalate(ctx, l, "nothing here carries out "+string(l.Action)+" (no platform repairer for it, no agent or webhook)")
	}
	if !l.Confirmed {
		if moved, ok := e.confirmFault(ctx, l); !ok {
			return moved
		}
	}
	if l.Action == repair.ActionGPUReset && e.agent != nil {
		// The agent refuses a busy GPU too; the loop waits before asking.
		st, err := e.agent.NodeStatus(ctx, l.Node)
		if err != nil {
			return e.waitOrTimeout(ctx, l, "agent node status: "+err.Error())
		}
		if busy := busyGPUs(st, l); busy != "" {
			return e.waitOrTimeout(ctx, l, "GPU busy: "+busy)
		}
	}
	ref := ""
	if l.Action == repair.ActionReboot && e.agent != nil {
		// The boot id before: a new one says the reboot happened.
		if st, err := e.agent.NodeStatus(ctx, l.Node); err == nil {
			ref = st.BootID
		}
	}
	now := e.clock.Now()
	if !e.repairs.admit(now) {
		entry.Decision, entry.Reason = audit.DecisionSkipped, fmt.Sprintf("repair breaker: %d repairs in the last %s (repair.breaker): %s waits",
			e.cfg.Repair.Breaker.MaxRepairs, e.cfg.Repair.Breaker.Window, l.Action)
		e.recordWait(l, entry)
		e.countRepair(ctx, l.Action, outcomeRefused)
		return e.waitOrTimeout(ctx, l, "repair breaker full")
	}
	fail := func(decision, why string, outcome string) bool {
		e.repairs.refund(now)
		entry.Decision, entry.Reason = decision, why
		e.recordWait(l, entry)
		e.countRepair(ctx, l.Action, outcome)
		return e.waitOrTimeout(ctx, l, why)
	}
	var detail string
	switch path {
	case "agent":
		job, err := e.agent.StartGPUReset(ctx, l.Node, repair.GPUResetRequest{ID: repairID(l), Node: l.Node, FaultID: l.FaultID, GPUUUID: l.GPUUUID})
		if err != nil {
			return fail(audit.DecisionFailed, "agent gpu_reset: "+err.Error(), outcomeFailed)
		}
		if job.State == repair.JobRefused || job.State == repair.JobFailed {
			e.repairs.refund(now)
			e.countRepair(ctx, l.Action, outcomeRefused)
			return e.escalate(ctx, l, "agent "+string(job.State)+" the GPU reset: "+job.Detail)
		}
		detail = "agent job " + job.ID
	case "platform":
		res, err := e.repairer().StartRepair(ctx, e.repairRequest(l, now))
		if err != nil {
			return fail(audit.DecisionFailed, "platform "+string(l.Action)+": "+err.Error(), outcomeFailed)
		}
		if res.Outcome != actuator.Applied && res.Outcome != actuator.AlreadyDone {
			// Not ours any more (a human took the node): touch nothing,
			// forget it, as a release that finds it so.
			e.repairs.refund(now)
			entry.Decision, entry.Reason, entry.Outcome = audit.DecisionSkipped, skipReason(res.Outcome, res.Detail)+": the loop ends", string(res.Outcome)
			e.record(entry)
			e.countRepair(ctx, l.Action, outcomeRefused)
			e.state.Released(l.Node, now)
			e.record(audit.Entry{Step: stepRelease, Decision: audit.DecisionSkipped, Node: l.Node, Platform: e.platformName(),
				FaultID: l.FaultID, Outcome: string(res.Outcome), Reason: "no longer ours: " + skipReason(res.Outcome, res.Detail)})
			return true
		}
		detail = string(res.Outcome) + ": " + res.Detail
	case "webhook":
		if err := e.postMaintenance(ctx, l); err != nil {
			return fail(audit.DecisionFailed, "maintenance webhook: "+err.Error(), outcomeFailed)
		}
		detail = "maintenance webhook posted"
	}
	e.countRepair(ctx, l.Action, outcomeActed)
	e.state.SetRepairRef(l.Node, ref)
	return e.advanceAt(ctx, l, repair.StepRepairing, now, what+": "+detail, func(en *audit.Entry) { en.RepairRef = ref })
}

// repairRequest is l's repair as the platform's Repairer gets it;
// requested is when the exporter asked (the repairing step's start).
func (e *remediationExporter) repairRequest(l lifecycle.Loop, requested time.Time) actuator.RepairRequest {
	return actuator.RepairRequest{Node: l.Node, GPUUUID: l.GPUUUID, FaultID: l.FaultID, Attempt: l.Attempt,
		FaultType: l.FaultType, Action: l.Action, Requested: requested,
		Reason: fmt.Sprintf("%s for %s (attempt %d)", l.Action, l.FaultID, l.Attempt)}
}

// describeRepair says what l's repair does, as the audit reads it.
func describeRepair(l lifecycle.Loop, path, platform string) string {
	var what string
	switch l.Action {
	case repair.ActionGPUReset:
		what = "reset GPU " + l.GPUUUID + " on " + l.Node
	case repair.ActionReboot:
		what = "reboot " + l.Node
	default:
		what = string(l.Action) + " " + l.Node
	}
	switch path {
	case "platform":
		what += " through " + platform
	case "agent":
		what += " through its agent"
	case "webhook":
		what += " through the maintenance webhook"
	}
	return fmt.Sprintf("%s (attempt %d, fault %s)", what, l.Attempt, l.FaultID)
}

// pollRepair reads how l's repair in flight goes: done → repaired; failed
// → the next repair; else it waits (bounded). Callers hold e.mu.
func (e *remediationExporter) pollRepair(ctx context.Context, l lifecycle.Loop) bool {
	if e.cfg.DryRun {
		return e.advance(ctx, l, repair.StepRepaired, "dry run: would wait until the "+string(l.Action)+" is done", nil)
	}
	done := func(detail string) bool {
		e.countRepair(ctx, l.Action, outcomeDone)
		return e.advance(ctx, l, repair.StepRepaired, detail, nil)
	}
	failed := func(detail string) bool {
		e.countRepair(ctx, l.Action, outcomeFailed)
		return e.escalate(ctx, l, string(l.Action)+" failed: "+detail)
	}
	var waiting string
	switch e.repairPath(l.Action) {
	case "agent":
		job, err := e.agent.Job(ctx, l.Node, repairID(l))
		switch {
		case err != nil:
			waiting = "agent job: " + err.Error()
		case job.State == repair.JobPassed:
			return done("agent: " + nonEmpty(job.Detail, "GPU reset done"))
		case job.State.Final():
			return failed("agent " + string(job.State) + ": " + job.Detail)
		default:
			waiting = "agent job " + string(job.State)
		}
	case "platform":
		prog, err := e.repairer().RepairStatus(ctx, e.repairRequest(l, l.Since))
		switch {
		case err != nil:
			waiting = "platform: " + err.Error()
		case prog.State == actuator.RepairDone:
			return done("platform: " + nonEmpty(prog.Detail, "done"))
		case prog.State == actuator.RepairFailed:
			return failed("platform: " + prog.Detail)
		default:
			waiting = "platform: " + string(prog.State) + " " + prog.Detail
		}
	default:
		waiting = "maintenance webhook posted"
	}
	if l.Action == repair.ActionReboot && l.Ref != "" && e.agent != nil {
		if st, err := e.agent.NodeStatus(ctx, l.Node); err == nil && st.BootID != "" && st.BootID != l.Ref {
			return done("agent: new boot id " + st.BootID)
		}
	}
	return e.waitOrTimeout(ctx, l, waiting)
}

// requestVerify asks the agent to verify the repaired node with the
// rule's checks. Callers hold e.mu.
func (e *remediationExporter) requestVerify(ctx context.Context, l lifecycle.Loop) bool {
	what := "verify " + l.Node + ": " + describeChecks(l.Checks)
	if e.cfg.DryRun {
		e.countRepair(ctx, actionVerify, outcomeDryRun)
		return e.advance(ctx, l, repair.StepVerifying, "would "+what, nil)
	}
	if e.agent == nil {
		return e.waitOrTimeout(ctx, l, "no agent to verify with")
	}
	job, err := e.agent.StartVerify(ctx, l.Node, repair.VerifyRequest{ID: verifyID(l), Node: l.Node, FaultID: l.FaultID, Checks: l.Checks})
	if err != nil {
		entry := e.repairEntry(l, repair.StepVerifying)
		entry.Decision, entry.Reason = audit.DecisionFailed, "agent verify: "+err.Error()
		e.recordWait(l, entry)
		return e.waitOrTimeout(ctx, l, "agent verify: "+err.Error())
	}
	if job.State.Final() && job.State != repair.JobPassed {
		return e.verifyFailed(ctx, l, job)
	}
	e.countRepair(ctx, actionVerify, outcomeActed)
	return e.advance(ctx, l, repair.StepVerifying, what+": agent job "+job.ID, nil)
}

// pollVerify reads the verification: passed → verified; failed → the
// next repair. Its results are a record on the fault (the audit entry) and
// in the console. Callers hold e.mu.
func (e *remediationExporter) pollVerify(ctx context.Context, l lifecycle.Loop) bool {
	if e.cfg.DryRun {
		return e.advance(ctx, l, repair.StepVerified, "dry run: would release once the verification passed", nil)
	}
	job, err := e.agent.Job(ctx, l.Node, verifyID(l))
	switch {
	case err != nil:
		return e.waitOrTimeout(ctx, l, "agent verify job: "+err.Error())
	case job.State == repair.JobPassed:
		e.state.SetVerification(l.Node, true, job.Results, e.clock.Now())
		e.countRepair(ctx, actionVerify, outcomePassed)
		var shown audit.Entry
		moved := e.advance(ctx, l, repair.StepVerified, "verification passed: "+describeResults(job.Results),
			func(en *audit.Entry) { en.Verification, shown = job.Results, *en })
		e.showVerification(l, shown)
		return moved
	case job.State.Final():
		return e.verifyFailed(ctx, l, job)
	}
	return e.waitOrTimeout(ctx, l, "agent verify job "+string(job.State))
}

// verifyFailed records a failed (or refused) verification and climbs the
// ladder. Callers hold e.mu.
func (e *remediationExporter) verifyFailed(ctx context.Context, l lifecycle.Loop, job repair.Job) bool {
	e.state.SetVerification(l.Node, false, job.Results, e.clock.Now())
	e.countRepair(ctx, actionVerify, outcomeFailed)
	entry := e.repairEntry(l, repair.StepVerifying)
	entry.Decision, entry.Reason, entry.Verification = audit.DecisionFailed,
		"verification "+string(job.State)+": "+nonEmpty(describeResults(job.Results), job.Detail), job.Results
	e.record(entry)
	e.showVerification(l, entry)
	l, _ = e.state.RepairLoop(l.Node)
	return e.escalate(ctx, l, "verification "+string(job.State))
}

// releaseVerified returns the verified node to service through the
// release path (ownership, dry run, audit, cooldown), every fault of ours
// on it with it. A release that fails is tried again at the next tick.
// Callers hold e.mu.
func (e *remediationExporter) releaseVerified(ctx context.Context, l lifecycle.Loop) bool {
	rel, ok := e.state.BeginManualRelease(l.Node)
	if !ok {
		return false
	}
	entry := audit.Entry{Step: stepRelease, Node: l.Node, Platform: e.platformName(), Actions: actionNames(rel.Actions),
		FaultID: strings.Join(rel.FaultIDs, ",")}
	released, detail, _ := e.releaseNode(ctx, rel, entry, "repaired and verified: "+strings.Join(rel.FaultIDs, ","))
	if !released {
		return false
	}
	now := e.clock.Now()
	e.observeStep(ctx, l.Step, now.Sub(l.Since))
	if !l.Onset.IsZero() {
		e.telemetry.RemediationTimeToRecovery.Record(context.WithoutCancel(ctx), max(now.Sub(l.Onset), 0).Seconds())
	}
	done := e.repairEntry(l, repair.StepReleased)
	done.Decision, done.Reason = e.repairDecision(), fmt.Sprintf("returned to service %s after the fault's onset: %s",
		now.Sub(l.Onset).Round(time.Second), detail)
	e.record(done)
	e.recordQuarantined()
	return false
}

func describeChecks(cs []repair.CheckSpec) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		switch c.Check {
		case repair.CheckDiag:
			parts[i] = fmt.Sprintf("dcgm_diag level %d", c.Level)
		case repair.CheckLinksSteady:
			parts[i] = "links_steady " + c.Window.String()
		default:
			parts[i] = string(c.Check)
		}
	}
	return strings.Join(parts, ", ")
}

func describeResults(rs []repair.CheckResult) string {
	parts := make([]string, 0, len(rs))
	for _, r := range rs {
		p := r.Check
		if r.GPU != "" {
			p += " " + r.GPU
		}
		if r.Passed {
			p += " passed"
		} else {
			p += " failed"
		}
		if r.Detail != "" {
			p += " (" + r.Detail + ")"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, "; ")
}

func nonEmpty(s, otherwise string) string {
	if s == "" {
		return otherwise
	}
	return s
}

// agentConfirmer is an agent client that can ask a node's agent whether
// its own hardware signals show a fault (internal/repair's PathConfirm).
type agentConfirmer interface {
	Confirm(ctx context.Context, node string, req repair.ConfirmRequest) (repair.Confirmation, error)
}

// confirmFault asks l's node agent, before the first repair, whether the
// node's own signals show the fault: a fault made of signals someone else
// forged about the node is not confirmed, and nothing is repaired (the
// loop ends; the node waits for a human). ok: confirmed (or confirmation
// not required); else moved says whether the loop moved. Callers hold
// e.mu.
func (e *remediationExporter) confirmFault(ctx context.Context, l lifecycle.Loop) (moved, ok bool) {
	if !e.cfg.Repair.RequireConfirmation {
		return false, true
	}
	entry := e.repairEntry(l, l.Step)
	c, can := e.agent.(agentConfirmer)
	if !can {
		return e.holdUnconfirmed(ctx, l, entry, "the agent client cannot ask the node to confirm a fault (repair.require_confirmation)"), false
	}
	req := repair.ConfirmRequest{ID: l.FaultID + "-confirm", Node: l.Node, FaultID: l.FaultID, GPUUUID: l.GPUUUID, Since: l.Onset}
	req.FaultType, req.XID = splitIDType(l.FaultType)
	for _, r := range e.repairRecords[l.Node] {
		if r.ID == l.FaultID {
			req.FaultType, req.XID = string(r.Type), r.XID
		}
	}
	got, err := c.Confirm(ctx, l.Node, req)
	if err != nil {
		if bound := e.stepBound(l); bound > 0 && e.clock.Now().Sub(l.Since) >= bound {
			return e.holdUnconfirmed(ctx, l, entry, "the agent did not answer within "+bound.String()+": "+err.Error()), false
		}
		entry.Decision, entry.Reason = audit.DecisionFailed, "agent confirm: "+err.Error()
		e.recordWait(l, entry)
		return false, false
	}
	detail := nonEmpty(got.Detail, "no detail")
	if len(got.Evidence) > 0 {
		detail += " (" + strings.Join(got.Evidence, "; ") + ")"
	}
	if !got.Confirmed {
		return e.holdUnconfirmed(ctx, l, entry, "the node's own signals do not show the fault: "+detail), false
	}
	entry.Decision, entry.RepairRef, entry.Reason = audit.DecisionActed, lifecycle.RefConfirmed, "confirmed by the node's agent: "+detail
	e.record(entry)
	e.state.ConfirmRepair(l.Node)
	return false, true
}

// holdUnconfirmed ends l's loop without a repair (why): the node stays
// quarantined and waits for a human. Never an RMA: nothing says the
// hardware is broken. Callers hold e.mu.
func (e *remediationExporter) holdUnconfirmed(ctx context.Context, l lifecycle.Loop, entry audit.Entry, why string) bool {
	entry.Decision, entry.RepairRef = audit.DecisionSkipped, lifecycle.RefUnconfirmed
	entry.Reason = "no repair: " + why + "; the node waits for a human"
	e.record(entry)
	e.countRepair(ctx, l.Action, outcomeRefused)
	e.state.HoldUnconfirmed(l.Node, why)
	return true
}

// splitIDType undoes fault.Record.IDType: gpu.xid.<n> is type gpu.xid
// with XID n.
func splitIDType(idType string) (string, int) {
	if rest, ok := strings.CutPrefix(idType, string(fault.TypeGPUXID)+"."); ok {
		if n, err := strconv.Atoi(rest); err == nil {
			return string(fault.TypeGPUXID), n
		}
	}
	return idType, 0
}
