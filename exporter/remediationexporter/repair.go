package remediationexporter // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter"

import (
	"context"
	"fmt"
	"slices"
	"time"

	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/audit"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/lifecycle"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/policy"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
)

// The repair loop (docs/fault-record.md, "The repair loop"): a node the
// exporter quarantined for a fault whose rule names a repair ladder moves
// quarantined → drained → repairing → repaired → verifying → verified →
// released, driven by a periodic tick on the exporter's clock; a failed
// repair or verification climbs the ladder, past it the node waits in rma
// for a human. lifecycle keeps the state; this file drives it, the steps
// are in repairstep.go, the webhooks in repairwebhook.go.

// nodeAgent is the node agents' repair API (internal/repair's signing
// client implements it): what the loop asks the agent of the node it
// repairs.
type nodeAgent interface {
	NodeStatus(ctx context.Context, node string) (repair.NodeStatus, error)
	StartGPUReset(ctx context.Context, node string, req repair.GPUResetRequest) (repair.Job, error)
	StartVerify(ctx context.Context, node string, req repair.VerifyRequest) (repair.Job, error)
	Job(ctx context.Context, node, id string) (repair.Job, error)
}

// internal/repair's signing client is the production agent: it must keep
// every method the loop calls, the confirmation included.
var (
	_ nodeAgent      = (*repair.Client)(nil)
	_ agentConfirmer = (*repair.Client)(nil)
)

// newAgentClient builds the agent client from repair.agent: internal/
// repair's Client, signing every request with the private key (tests
// replace it).
var newAgentClient = newRepairClient

func newRepairClient(cfg RepairAgentConfig, _ exporter.Settings) (nodeAgent, error) {
	key, err := repair.LoadPrivateKey(cfg.PrivateKeyFile)
	if err != nil {
		return nil, fmt.Errorf("private_key_file: %w", err)
	}
	signer, err := repair.NewSigner(key)
	if err != nil {
		return nil, fmt.Errorf("private_key_file: %w", err)
	}
	tlsCfg, err := cfg.TLS.LoadTLSConfig(context.Background())
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	c, err := repair.NewClient(repair.ClientConfig{URLTemplate: cfg.Endpoint, TLS: tlsCfg, Timeout: repairRequestTimeout}, signer)
	if err != nil {
		return nil, fmt.Errorf("endpoint: %w", err)
	}
	return c, nil
}

// newRepairAgent is the factory's agent for c: none with the loop off or
// in a dry run (which calls nothing).
func newRepairAgent(c *Config, set exporter.Settings) (nodeAgent, error) {
	if !c.Repair.Enabled || c.DryRun {
		return nil, nil
	}
	a, err := newAgentClient(c.Repair.Agent, set)
	if err != nil {
		return nil, fmt.Errorf("remediationexporter: repair.agent: %w", err)
	}
	return a, nil
}

// stepRepair is the audit step of the repair loop's entries.
const stepRepair = "repair"

// repairRequestTimeout bounds the agent and platform calls of one node's
// step in one tick.
const repairRequestTimeout = 30 * time.Second

// maxStepsPerTick bounds how far one tick moves one node (a dry run, or a
// repair done at once, moves several steps).
const maxStepsPerTick = 12

// repairOn reports whether the loop runs.
func (e *remediationExporter) repairOn() bool { return e.cfg.Repair.Enabled }

// repairer is the platform's Repairer, or nil.
func (e *remediationExporter) repairer() actuator.Repairer {
	r, _ := e.platform.(actuator.Repairer)
	return r
}

// startRepair starts node's repair loop for r after its quarantine (acted
// or, in a dry run, logged). A fault on a node already in a loop joins it.
// Callers hold e.mu.
func (e *remediationExporter) startRepair(r fault.Record, d policy.Decision, node string) {
	e.keepRepairRecord(node, r)
	now := e.clock.Now()
	plan := lifecycle.RepairPlan{FaultID: r.ID, FaultType: r.IDType(), GPUUUID: r.GPUUUID, Rule: d.Rule,
		Ladder: slices.Clone(d.Repair), Checks: slices.Clone(d.Checks), Onset: r.FirstSeen.UTC()}
	l, ok := e.state.StartRepair(node, plan, now)
	if !ok {
		return
	}
	decision := e.repairDecision()
	for i, ev := range l.History {
		if i > 0 { // onset → recorded: detection and delivery; recorded → quarantined: the decision
			prev := l.History[i-1]
			e.observeStep(context.Background(), prev.Step, ev.At.Sub(prev.At))
		}
		entry := e.repairEntry(l, ev.Step)
		entry.Time, entry.Decision = ev.At.UTC(), decision
		entry.State, entry.Severity = string(r.State), string(r.Severity)
		entry.RepairLadder = actionStrings(l.Ladder)
		entry.RepairChecks = l.Checks
		switch ev.Step {
		case repair.StepOnset:
			entry.Reason = "fault onset (the record's first signal)"
		case repair.StepRecorded:
			entry.Reason = "fault record received"
		case repair.StepQuarantined:
			entry.Reason = "repair loop started: ladder " + fmt.Sprint(l.Ladder) + ", then rma"
		}
		e.record(entry)
	}
	e.recordLifecycleNodes()
}

// keepRepairRecord keeps r for node's evidence bundle (bounded).
func (e *remediationExporter) keepRepairRecord(node string, r fault.Record) {
	recs := e.repairRecords[node]
	for i, old := range recs {
		if old.ID == r.ID {
			recs[i] = r
			return
		}
	}
	recs = append(recs, r)
	if len(recs) > lifecycle.MaxRepairFaults {
		recs = recs[len(recs)-lifecycle.MaxRepairFaults:]
	}
	e.repairRecords[node] = recs
}

// repairDecision is the audit decision of a step the loop moved: acted,
// or dry_run (the loop moves as if done, so the dry run shows its path).
func (e *remediationExporter) repairDecision() string {
	if e.cfg.DryRun {
		return audit.DecisionDryRun
	}
	return audit.DecisionActed
}

// repairEntry is the audit entry of l's step.
func (e *remediationExporter) repairEntry(l lifecycle.Loop, step repair.Step) audit.Entry {
	return audit.Entry{Step: stepRepair, FaultID: l.FaultID, FaultType: l.FaultType, Node: l.Node, Platform: e.platformName(),
		Rule: l.Rule, LifecycleStep: string(step), RepairAction: string(l.Action), RepairAttempt: l.Attempt}
}

// scheduleRepairTick arms the loop's next tick. Callers hold e.mu.
func (e *remediationExporter) scheduleRepairTick() {
	w := &releaseTimer{}
	w.stop = e.clock.AfterFunc(e.cfg.Repair.PollInterval, func() { e.repairTick(w) })
	e.repairWatch = w
}

// stopRepairTicks stops the loop's tick (Shutdown). Callers hold e.mu.
func (e *remediationExporter) stopRepairTicks() {
	if e.repairWatch != nil {
		e.repairWatch.stop()
		e.repairWatch = nil
	}
}

// repairTick runs on the loop's timer: it arms the next tick and advances
// every node.
func (e *remediationExporter) repairTick(w *releaseTimer) {
	if !e.enter() {
		return
	}
	defer e.inFlight.Done()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.repairWatch != w {
		return // stopped meanwhile
	}
	e.scheduleRepairTick()
	e.driveRepairs(e.lifeCtx)
}

// driveRepairs advances every node's loop as far as it can go now. Only
// the replica that acts drives; another one keeps its state for when it
// takes over. Callers hold e.mu.
func (e *remediationExporter) driveRepairs(ctx context.Context) {
	defer e.recordLifecycleNodes()
	loops := e.state.RepairLoops()
	for node := range e.repairRecords {
		if _, ok := e.state.RepairLoop(node); !ok {
			delete(e.repairRecords, node) // its loop ended
		}
	}
	for node := range e.repairNoted {
		if _, ok := e.state.RepairLoop(node); !ok {
			delete(e.repairNoted, node)
		}
	}
	if len(loops) == 0 || e.notOwner() != nil {
		return
	}
	for _, l := range loops {
		for range maxStepsPerTick {
			if ctx.Err() != nil {
				return
			}
			sctx, cancel := context.WithTimeout(ctx, repairRequestTimeout)
			moved := e.stepLoop(sctx, l)
			cancel()
			var ok bool
			if l, ok = e.state.RepairLoop(l.Node); !moved || !ok {
				break
			}
		}
	}
}

// advance moves l to step `to`, audits it (decision, reason; mod fills
// the entry's extra fields) and records the time spent in the step left.
// It reports whether the loop moved. Callers hold e.mu.
func (e *remediationExporter) advance(ctx context.Context, l lifecycle.Loop, to repair.Step, reason string, mod func(*audit.Entry)) bool {
	return e.advanceAt(ctx, l, to, e.clock.Now(), reason, mod)
}

// advanceAt is advance at now (a repair's step starts when it was asked).
func (e *remediationExporter) advanceAt(ctx context.Context, l lifecycle.Loop, to repair.Step, now time.Time, reason string, mod func(*audit.Entry)) bool {
	left, spent, ok := e.state.AdvanceRepair(l.Node, to, now, reason)
	if !ok {
		e.logger.Warn("remediation: repair loop cannot move", zap.String("node", l.Node),
			zap.String("from", string(l.Step)), zap.String("to", string(to)))
		return false
	}
	e.observeStep(ctx, left, spent)
	nl, _ := e.state.RepairLoop(l.Node)
	entry := e.repairEntry(nl, to)
	entry.Time, entry.Decision, entry.Reason = now.UTC(), e.repairDecision(), reason
	if mod != nil {
		mod(&entry)
	}
	e.record(entry)
	return true
}

// escalate moves l to the ladder's next repair, or to rma past it (and
// asks a human), after why. Callers hold e.mu.
func (e *remediationExporter) escalate(ctx context.Context, l lifecycle.Loop, why string) bool {
	to, left, spent, ok := e.state.EscalateRepair(l.Node, e.clock.Now(), why)
	if !ok {
		return false
	}
	e.observeStep(ctx, left, spent)
	nl, _ := e.state.RepairLoop(l.Node)
	entry := e.repairEntry(nl, to)
	entry.Decision, entry.Reason = e.repairDecision(), why
	if to != repair.StepRMA {
		entry.Reason = why + ": next repair " + string(nl.Action)
	}
	e.record(entry)
	if to == repair.StepRMA {
		e.requestRMA(ctx, nl)
	}
	return true
}

// stepBound is how long l may stay in its step.
func (e *remediationExporter) stepBound(l lifecycle.Loop) time.Duration {
	t := e.cfg.Repair.StepTimeouts
	switch l.Step {
	case repair.StepQuarantined, repair.StepDrained:
		return t.Drain
	case repair.StepRepairing:
		if l.Action == repair.ActionReboot {
			return t.Reboot
		}
		return t.Repair
	case repair.StepRepaired, repair.StepVerifying:
		return t.Verify
	}
	return 0 // verified (the release retries), rma (a human)
}

// waitOrTimeout keeps l waiting (waiting says for what) until its step's
// bound; past it, the step timed out: counted, audited and escalated.
// It reports whether the loop moved. Callers hold e.mu.
func (e *remediationExporter) waitOrTimeout(ctx context.Context, l lifecycle.Loop, waiting string) bool {
	bound := e.stepBound(l)
	in := e.clock.Now().Sub(l.Since)
	if bound <= 0 || in < bound {
		return false
	}
	e.telemetry.RemediationLifecycleStepTimeouts.Add(context.WithoutCancel(ctx), 1,
		metric.WithAttributeSet(attribute.NewSet(attribute.String(metadata.TelemetryAttrStep, string(l.Step)))))
	if l.Step == repair.StepQuarantined || l.Step == repair.StepDrained || l.Step == repair.StepRepairing {
		e.countRepair(ctx, l.Action, outcomeTimedOut)
	}
	return e.escalate(ctx, l, fmt.Sprintf("%s timed out after %s (repair.step_timeouts bound %s): %s",
		l.Step, in.Round(time.Second), bound, waiting))
}

// Outcomes of the repairs counter besides the audit's decisions (acted,
// dry_run, skipped, failed) and refused.
const (
	outcomeDone     = "done"      // the repair reported done
	outcomePassed   = "passed"    // the verification passed
	outcomeTimedOut = "timed_out" // the step outlasted its bound
)

// actionVerify names the verification in the repairs counter.
const actionVerify = "verify"

func (e *remediationExporter) countRepair(ctx context.Context, action repair.Action, outcome string) {
	e.telemetry.RemediationRepairs.Add(context.WithoutCancel(ctx), 1, metric.WithAttributeSet(attribute.NewSet(
		attribute.String(metadata.TelemetryAttrAction, string(action)),
		attribute.String(metadata.TelemetryAttrOutcome, outcome))))
}

func (e *remediationExporter) observeStep(ctx context.Context, step repair.Step, spent time.Duration) {
	e.telemetry.RemediationLifecycleStepSeconds.Record(context.WithoutCancel(ctx), max(spent, 0).Seconds(),
		metric.WithAttributeSet(attribute.NewSet(attribute.String(metadata.TelemetryAttrStep, string(step)))))
}

// recordLifecycleNodes records the nodes in each step of the loop (0
// included). Callers hold e.mu.
func (e *remediationExporter) recordLifecycleNodes() {
	if !e.repairOn() {
		return
	}
	counts := e.state.RepairSteps()
	for _, s := range []repair.Step{repair.StepQuarantined, repair.StepDrained, repair.StepRepairing, repair.StepRepaired,
		repair.StepVerifying, repair.StepVerified, repair.StepRMA} {
		e.telemetry.RemediationLifecycleNodes.Record(context.Background(), int64(counts[s]),
			metric.WithAttributeSet(attribute.NewSet(attribute.String(metadata.TelemetryAttrStep, string(s)))))
	}
}

// repairBudget is the repair breaker: at most max repair requests in any
// window, counted by this exporter (restored from its audit file).
type repairBudget struct {
	max    int
	window time.Duration
	at     []time.Time // admitted requests, oldest first
}

func (b *repairBudget) trim(now time.Time) {
	i := 0
	for i < len(b.at) && now.Sub(b.at[i]) >= b.window {
		i++
	}
	b.at = b.at[i:]
}

// admit spends a slot at now; false when the window is full.
func (b *repairBudget) admit(now time.Time) bool {
	b.trim(now)
	if len(b.at) >= b.max {
		return false
	}
	b.at = append(b.at, now)
	return true
}

// refund gives back the slot admitted at `at` (a repair not carried out).
func (b *repairBudget) refund(at time.Time) {
	if i := slices.Index(b.at, at); i >= 0 {
		b.at = slices.Delete(b.at, i, i+1)
	}
}

// restore counts a request an earlier life made at `at`.
func (b *repairBudget) restore(at time.Time) {
	b.at = append(b.at, at)
	slices.SortFunc(b.at, func(a, c time.Time) int { return a.Compare(c) })
	if len(b.at) > b.max {
		b.at = b.at[len(b.at)-b.max:]
	}
}

func actionStrings(as []repair.Action) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = string(a)
	}
	return out
}

// restoreRepair replays one step of a repair loop an earlier life moved
// (acted, or logged in a dry run that this life repeats), so the loop
// resumes where it was: at worst one idempotent request is made again
// (the agent's job id and the platform's request are keyed by fault,
// action and attempt). Callers hold e.mu.
func (e *remediationExporter) restoreRepair(entry audit.Entry) {
	plan := lifecycle.RepairPlan{FaultID: entry.FaultID, FaultType: entry.FaultType, Rule: entry.Rule, Checks: entry.RepairChecks}
	for _, a := range entry.RepairLadder {
		plan.Ladder = append(plan.Ladder, repair.Action(a))
	}
	step := repair.Step(entry.LifecycleStep)
	if entry.Decision == audit.DecisionFailed {
		// A failed verification: its results only (the step that
		// follows has an entry of its own).
		e.state.SetVerification(entry.Node, false, entry.Verification, entry.Time)
		return
	}
	if step == repair.StepRepairing && !entry.Time.IsZero() {
		e.repairs.restore(entry.Time) // a request the repair breaker counted
	}
	e.state.RestoreRepair(entry.Node, plan, step, repair.Action(entry.RepairAction), entry.RepairAttempt,
		entry.RepairRef, entry.Verification, entry.Time, entry.Reason)
}

// recordWait audits entry, a wait of l's step that moves nothing (a
// refusal, a failed call), once per step, attempt and reason: a wait
// repeated every tick until the step's bound would flood the audit.
// Callers hold e.mu.
func (e *remediationExporter) recordWait(l lifecycle.Loop, entry audit.Entry) {
	key := fmt.Sprintf("%s/%d/%s/%s", l.Step, l.Attempt, entry.Decision, entry.Reason)
	if e.repairNoted[l.Node] == key {
		return
	}
	e.repairNoted[l.Node] = key
	e.record(entry)
}
