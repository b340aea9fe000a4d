package remediationexporter // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter"

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/audit"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/lifecycle"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/policy"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/webhook"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

// rmaRequested is the loop's Ref once its RMA review request went out (or
// was audited in a dry run, or could not go out for want of a webhook).
const rmaRequested = "rma_requested"

// routeMaintenance is the route of a maintenance webhook: a repair for
// whatever carries it out, not a page.
const routeMaintenance = "maintenance"

// loopFault is the webhook's fault of l: the record kept for the bundle,
// else what the loop knows of it.
func (e *remediationExporter) loopFault(l lifecycle.Loop) webhook.Fault {
	for _, r := range e.repairRecords[l.Node] {
		if r.ID == l.FaultID {
			return webhook.FaultFromRecord(r)
		}
	}
	return webhook.Fault{ID: l.FaultID, Type: l.FaultType, HostName: l.Node, GPUUUID: l.GPUUUID, Evidence: []webhook.Evidence{}}
}

// postMaintenance asks the generic maintenance webhook for l's repair
// (request reboot or gpu_reset, with the node, the fault and the attempt),
// signed as every post. Callers hold e.mu.
func (e *remediationExporter) postMaintenance(ctx context.Context, l lifecycle.Loop) error {
	if e.webhook == nil {
		return errors.New("webhook not configured")
	}
	entry := e.repairEntry(l, repair.StepRepairing)
	entry.Step = stepWebhook
	p := webhook.Payload{Route: routeMaintenance, Fault: e.loopFault(l), Decision: webhook.Decision{
		Request: string(l.Action), Outcome: audit.DecisionActed, Actions: []string{}, Platform: e.platformName(), Node: l.Node,
		Reason: describeRepair(l, "webhook", ""), Rule: l.Rule, Attempt: l.Attempt,
	}}
	return e.post(ctx, entry, p, l.FaultID+"/repair/"+string(l.Action)+"/"+strconv.Itoa(l.Attempt))
}

// requestRMA asks a human for an RMA review of l's node, with the evidence
// bundle, once (retried at the next tick when the post fails). Callers
// hold e.mu.
func (e *remediationExporter) requestRMA(ctx context.Context, l lifecycle.Loop) {
	if l.Ref == rmaRequested {
		return
	}
	bundle := e.evidenceBundle(l)
	reason := fmt.Sprintf("every repair of the ladder %v failed: the node waits for a human (RMA review)", l.Ladder)
	p := webhook.Payload{Route: policy.Route(fault.SeverityP1), Fault: e.loopFault(l), Decision: webhook.Decision{
		Request: string(policy.RequestHumanApproval), Outcome: string(repair.StepRMA), Actions: []string{},
		Platform: e.platformName(), Node: l.Node, Reason: reason, Rule: l.Rule, DryRun: e.cfg.DryRun,
	}, EvidenceBundle: &bundle}
	entry := e.repairEntry(l, repair.StepRMA)
	entry.Step = stepWebhook
	switch {
	case e.cfg.DryRun:
		body, _ := json.Marshal(p)
		e.record(withDecision(entry, audit.DecisionDryRun, "would post the RMA review request: "+string(body)))
		e.countRepair(ctx, repair.ActionRMA, outcomeDryRun)
	case e.webhook == nil:
		e.record(withDecision(entry, audit.DecisionSkipped, "RMA review: webhook not configured: the node waits for a human in the console"))
		e.countRepair(ctx, repair.ActionRMA, outcomeSkipped)
	default:
		if err := e.post(ctx, entry, p, l.FaultID+"/rma/"+string(policy.RequestHumanApproval)); err != nil {
			e.countRepair(ctx, repair.ActionRMA, outcomeFailed)
			return
		}
		e.countRepair(ctx, repair.ActionRMA, outcomeActed)
	}
	e.state.SetRepairRef(l.Node, rmaRequested)
	done := e.repairEntry(l, repair.StepRMA)
	done.Decision, done.Reason, done.RepairRef = e.repairDecision(), "RMA review requested", rmaRequested
	e.record(done)
}

// evidenceBundle gathers what a human needs to review l's node: the fault
// records kept, the last hardware readings they carry, the XID history,
// the verification's results and every step with its time.
func (e *remediationExporter) evidenceBundle(l lifecycle.Loop) webhook.EvidenceBundle {
	b := webhook.EvidenceBundle{Node: l.Node, FaultIDs: append([]string{}, l.FaultIDs...), Faults: []webhook.Fault{},
		Readings: []webhook.Evidence{}, XIDHistory: []webhook.XIDEvent{}, Verification: append([]repair.CheckResult{}, l.Results...),
		Steps: make([]webhook.LifecycleEvent, 0, len(l.History))}
	addRecordEvidence(&b, e.repairRecords[l.Node])
	b.Verifications = make([]webhook.Verification, 0, len(l.Verifications))
	for _, v := range l.Verifications {
		b.Verifications = append(b.Verifications, webhook.Verification{At: v.At.UTC().Format(time.RFC3339Nano), Passed: v.Passed,
			Results: append([]repair.CheckResult{}, v.Results...)})
	}
	for _, ev := range l.History {
		b.Steps = append(b.Steps, webhook.LifecycleEvent{Step: string(ev.Step), At: ev.At.UTC().Format(time.RFC3339Nano),
			Action: string(ev.Action), Attempt: ev.Attempt, Detail: ev.Detail})
	}
	return b
}

// rmaReviewBundle is the evidence bundle of a fault the policy sends to a
// human for an RMA review without a repair loop (rma_review: XID 62/63, a
// failed row remap, a corrupt inforom): the record, the last readings its
// evidence carries and its XIDs, with the node's records a loop keeps.
func (e *remediationExporter) rmaReviewBundle(r fault.Record, node string) webhook.EvidenceBundle {
	records := []fault.Record{r}
	ids := []string{r.ID}
	for _, other := range e.repairRecords[node] {
		if other.ID != r.ID {
			records, ids = append(records, other), append(ids, other.ID)
		}
	}
	b := webhook.EvidenceBundle{Node: node, FaultIDs: ids, Faults: []webhook.Fault{}, Readings: []webhook.Evidence{},
		XIDHistory: []webhook.XIDEvent{}, Verification: []repair.CheckResult{}, Verifications: []webhook.Verification{},
		Steps: []webhook.LifecycleEvent{}}
	addRecordEvidence(&b, records)
	return b
}

// addRecordEvidence adds records to b: the records, the last hardware
// reading per signal and GPU among their evidence (newest first) and the
// XIDs they report (oldest first).
func addRecordEvidence(b *webhook.EvidenceBundle, records []fault.Record) {
	type key struct{ signal, gpu string }
	latest := map[key]fault.Evidence{}
	for _, r := range records {
		b.Faults = append(b.Faults, webhook.FaultFromRecord(r))
		if r.XID != 0 {
			b.XIDHistory = append(b.XIDHistory, webhook.XIDEvent{XID: r.XID, Time: r.FirstSeen.UTC().Format(time.RFC3339Nano), FaultID: r.ID, GPUUUID: r.GPUUUID})
		}
		for _, ev := range r.Evidence {
			if ev.Signal == semconv.MetricGPUXIDLast && ev.Value > 0 && ev.Value == float64(int(ev.Value)) {
				b.XIDHistory = append(b.XIDHistory, webhook.XIDEvent{XID: int(ev.Value), Time: ev.Time.UTC().Format(time.RFC3339Nano), FaultID: r.ID, GPUUUID: r.GPUUUID})
			}
			if !semconv.HardwareSignal(ev.Signal) {
				continue
			}
			k := key{ev.Signal, r.GPUUUID}
			if old, ok := latest[k]; !ok || ev.Time.After(old.Time) {
				latest[k] = ev
			}
		}
	}
	readings := make([]fault.Evidence, 0, len(latest))
	for _, ev := range latest {
		readings = append(readings, ev)
	}
	sort.Slice(readings, func(i, j int) bool {
		if !readings[i].Time.Equal(readings[j].Time) {
			return readings[i].Time.After(readings[j].Time)
		}
		return readings[i].Signal < readings[j].Signal
	})
	if len(readings) > 0 {
		rec := fault.Record{Evidence: readings}
		b.Readings = webhook.FaultFromRecord(rec).Evidence
	}
	sort.SliceStable(b.XIDHistory, func(i, j int) bool { return b.XIDHistory[i].Time < b.XIDHistory[j].Time })
}
