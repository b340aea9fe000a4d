package slurm // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/slurm"

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
)

// Slurm carries out one repair itself: the reboot, as
//
//	scontrol reboot ASAP nextstate=DOWN reason="<prefix> reboot <attempt> <fault.type> <fault.id>" <node>
//
// ASAP drains the node (it is drained by us already) and reboots it through
// slurm.conf's RebootProgram as soon as no job is left on it. nextstate is
// DOWN, not RESUME: with RESUME (and with ASAP alone) slurmctld returns the
// node to service the moment its slurmd registers after the boot, before
// anyone checked the GPUs, and the loop verifies before it releases. With
// DOWN the node stays DOWN after the boot with our reason (Slurm appends
// " : reboot complete"), and the exporter's Release resumes it only after
// the verification passed.
//
// slurmctld shows the reboot as state flags: REBOOT_REQUESTED (waiting for
// the node to be idle), then REBOOT_ISSUED (RebootProgram ran, the node is
// DOWN until its slurmd registers again). It appends to the reason
// " : reboot issued", then " : reboot complete" when the node registered
// with a boot time after the request, or " : reboot timed out" when it did
// not within ResumeTimeout (the node is then DOWN). RepairStatus reads
// those.
//
// A GPU reset is not a Slurm repair: the node's agent does it. The REST
// transport has no reboot (slurmrestd offers no endpoint for it): with
// slurmrestd, Repairs is empty and the exporter falls back to the agent and
// the maintenance webhook.

// Reason suffixes slurmctld appends to a rebooting node's reason.
const (
	rebootIssued   = " : reboot issued"
	rebootComplete = " : reboot complete"
	rebootTimedOut = " : reboot timed out"
)

var _ actuator.Repairer = (*Platform)(nil)

// Repairs implements actuator.Repairer: the reboot, when the transport is
// scontrol.
func (p *Platform) Repairs() []repair.Action {
	if _, ok := p.transport.(rebooter); !ok {
		return nil
	}
	return []repair.Action{repair.ActionReboot}
}

// rebootMark starts the reason of our reboot for req's attempt:
// "<prefix> reboot <attempt>". With the fault id in the reason it is the
// idempotency key.
func (p *Platform) rebootMark(req actuator.RepairRequest) string {
	return fmt.Sprintf("%s reboot %d", p.prefix, req.Attempt)
}

// rebootReason is "<prefix> reboot <attempt> <fault.type> <fault.id>[ <text>]"
// on one line, the fault id within the first maxReasonLen bytes.
func (p *Platform) rebootReason(req actuator.RepairRequest) string {
	fields := []string{req.FaultType, req.FaultID, req.Reason}
	if strings.Contains(req.Reason, req.FaultID) {
		fields = []string{req.Reason}
	}
	parts := []string{p.rebootMark(req)}
	for _, s := range fields {
		if s = sanitize(s); s != "" {
			parts = append(parts, s)
		}
	}
	r := strings.Join(parts, " ")
	if len(r) > maxReasonLen {
		r = strings.ToValidUTF8(r[:maxReasonLen], "")
	}
	return r
}

// isOurReboot reports whether reason is the one our reboot for req wrote,
// with whatever slurmctld appended since.
func (p *Platform) isOurReboot(reason string, req actuator.RepairRequest) bool {
	reason = strings.TrimSpace(reason)
	return strings.HasPrefix(reason, p.rebootMark(req)+" ") && strings.Contains(reason, req.FaultID)
}

// rebootPending reports whether slurmctld holds a reboot for the node that
// has not finished.
func rebootPending(n nodeInfo) bool {
	return n.has("REBOOT_REQUESTED") || n.has("REBOOT_ISSUED")
}

func validRepair(req actuator.RepairRequest) error {
	switch {
	case strings.TrimSpace(req.FaultID) == "":
		return errors.New("slurm: repair request without a fault id")
	case strings.ContainsAny(req.FaultID, " \t\n\""):
		return fmt.Errorf("slurm: repair request: fault id %q has spaces or quotes", req.FaultID)
	case req.Attempt < 1:
		return fmt.Errorf("slurm: repair request for fault %s: attempt %d, want 1 or more", req.FaultID, req.Attempt)
	}
	return nil
}

// StartRepair implements actuator.Repairer: it reboots req.Node with
// nextstate=DOWN (see above). The node must be quarantined by us for the
// fault: DRAIN or DOWN with our prefix and the fault id in the reason, and
// the drain still the one this process wrote (drains.go); any other node is
// NotOurs and untouched. A reboot of ours for the same fault and attempt,
// pending or done, is AlreadyDone; a pending reboot of anyone else's (or of
// another attempt) is left alone.
func (p *Platform) StartRepair(ctx context.Context, req actuator.RepairRequest) (actuator.Result, error) {
	rb, ok := p.transport.(rebooter)
	if !ok || req.Action != repair.ActionReboot {
		return actuator.Result{Outcome: actuator.SkipExcluded, Detail: fmt.Sprintf("Slurm does not carry out %q here (it reboots through scontrol only)", req.Action)}, nil
	}
	if err := validRepair(req); err != nil {
		return actuator.Result{}, err
	}
	name, node, missing, err := p.lookupNode(ctx, req.Node)
	if err != nil {
		return actuator.Result{}, err
	}
	if missing != "" {
		return actuator.Result{Outcome: actuator.SkipNotFound, Detail: missing}, nil
	}
	if p.isOurReboot(node.Reason, req) {
		return actuator.Result{Outcome: actuator.AlreadyDone, Detail: fmt.Sprintf("%s: reboot %d already requested (%s): %q",
			name, req.Attempt, strings.Join(node.States, "+"), node.Reason)}, nil
	}
	if rebootPending(node) {
		return actuator.Result{Outcome: actuator.NotOurs, Detail: fmt.Sprintf("%s has another reboot pending (%s): %q, left alone",
			name, strings.Join(node.States, "+"), node.Reason)}, nil
	}
	if !node.unavailable() || !p.ours(node.Reason) || !strings.Contains(node.Reason, req.FaultID) {
		return actuator.Result{Outcome: actuator.NotOurs, Detail: fmt.Sprintf("%s is not quarantined by this exporter for fault %s (%s, %q): not rebooted",
			name, req.FaultID, strings.Join(node.States, "+"), node.Reason)}, nil
	}
	mark, held := p.drains.get(name)
	if !held || !mark.still(node) {
		return actuator.Result{Outcome: actuator.NotOurs, Detail: fmt.Sprintf("%s: %q is not a drain this exporter holds (drained again, or before a restart): not rebooted",
			name, node.Reason)}, nil
	}
	reason := p.rebootReason(req)
	if err := rb.reboot(ctx, name, reason); err != nil {
		if errors.Is(err, errNodeNotFound) {
			return actuator.Result{Outcome: actuator.SkipNotFound, Detail: "no Slurm node " + name}, nil
		}
		return actuator.Result{}, err
	}
	// The reboot replaced our drain's reason: what Release compares now.
	m := p.readBack(ctx, name, reason)
	m.reboot = true
	p.drains.record(name, m)
	p.logger.Info("requested Slurm reboot", zap.String("node", name), zap.String("reason", reason))
	return actuator.Result{Outcome: actuator.Applied, Detail: fmt.Sprintf("scontrol reboot ASAP nextstate=DOWN reason=%q %s", reason, name)}, nil
}

// RepairStatus implements actuator.Repairer from the node's flags and the
// suffix slurmctld appended to our reason: pending while REBOOT_REQUESTED
// or REBOOT_ISSUED is set; done once the node registered after the reboot
// (" : reboot complete", BootTime not before the request); failed when the
// reboot timed out, or our reboot is gone (cancelled, reason replaced).
func (p *Platform) RepairStatus(ctx context.Context, req actuator.RepairRequest) (actuator.RepairProgress, error) {
	if req.Action != repair.ActionReboot {
		return actuator.RepairProgress{State: actuator.RepairUnknown, Detail: fmt.Sprintf("Slurm does not carry out %q", req.Action)}, nil
	}
	if err := validRepair(req); err != nil {
		return actuator.RepairProgress{}, err
	}
	name, node, missing, err := p.lookupNode(ctx, req.Node)
	if err != nil {
		return actuator.RepairProgress{}, err
	}
	if missing != "" {
		return actuator.RepairProgress{State: actuator.RepairFailed, Detail: missing}, nil
	}
	return rebootProgress(name, node, p.isOurReboot(node.Reason, req), req.Requested), nil
}

// rebootProgress reads a node's reboot; ours says the node's reason is our
// reboot's for the request.
func rebootProgress(name string, node nodeInfo, ours bool, requested time.Time) actuator.RepairProgress {
	state := strings.Join(node.States, "+")
	reason := strings.TrimSpace(node.Reason)
	switch {
	case !ours:
		return actuator.RepairProgress{State: actuator.RepairFailed, Detail: fmt.Sprintf("%s: our reboot request is gone (cancelled or replaced): %s %q", name, state, node.Reason)}
	case strings.HasSuffix(reason, strings.TrimSpace(rebootTimedOut)):
		return actuator.RepairProgress{State: actuator.RepairFailed, Detail: fmt.Sprintf("%s: the node did not come back within ResumeTimeout: %s %q", name, state, node.Reason)}
	case rebootPending(node):
		return actuator.RepairProgress{State: actuator.RepairPending, Detail: fmt.Sprintf("%s: %s", name, state)}
	case strings.HasSuffix(reason, strings.TrimSpace(rebootComplete)):
		// BootTime has one-second resolution.
		if !node.BootTime.IsZero() && !requested.IsZero() && node.BootTime.Before(requested.Truncate(time.Second)) {
			return actuator.RepairProgress{State: actuator.RepairFailed, Detail: fmt.Sprintf("%s: reboot reported complete but BootTime %s precedes the request %s",
				name, node.BootTime.Format(time.DateTime), requested.Format(time.DateTime))}
		}
		return actuator.RepairProgress{State: actuator.RepairDone, Detail: fmt.Sprintf("%s rebooted at %s, %s", name, node.BootTime.Format(time.DateTime), state)}
	default:
		return actuator.RepairProgress{State: actuator.RepairFailed, Detail: fmt.Sprintf("%s: no reboot pending and none completed: %s %q", name, state, node.Reason)}
	}
}

// Drained implements actuator.Repairer: the node is out of service (DRAIN
// or DOWN) and no job holds it: no ALLOCATED, MIXED or COMPLETING state
// (Slurm's DRAINING) and no allocated CPU. A node in service is not
// drained, whatever runs on it: a job could start any moment.
func (p *Platform) Drained(ctx context.Context, reqNode string) (bool, string, error) {
	name, node, missing, err := p.lookupNode(ctx, reqNode)
	if err != nil {
		return false, "", err
	}
	if missing != "" {
		return false, missing, nil
	}
	drained, detail := drainedState(node)
	return drained, name + ": " + detail, nil
}

func drainedState(node nodeInfo) (bool, string) {
	state := strings.Join(node.States, "+")
	if !node.unavailable() {
		return false, "in service (" + state + "): jobs may start"
	}
	for _, busy := range []string{"ALLOCATED", "MIXED", "COMPLETING"} {
		if node.has(busy) {
			return false, fmt.Sprintf("draining: jobs still run (%s)", state)
		}
	}
	if node.CPUAlloc > 0 {
		return false, fmt.Sprintf("draining: jobs hold %d CPUs (%s)", node.CPUAlloc, state)
	}
	return true, "drained, no job (" + state + ")"
}
