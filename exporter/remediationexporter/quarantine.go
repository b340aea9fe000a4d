package remediationexporter // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter"

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/audit"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/policy"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/webhook"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

// quarantine applies the node actions the decision adds for this fault.
// It returns the outcome for the webhook payload (acted, dry_run, skipped,
// failed, or "" when there was nothing to do), why, and the actions.
// Callers hold e.mu.
func (e *remediationExporter) quarantine(ctx context.Context, r fault.Record, d policy.Decision, node string) (outcome, why string, actions []string, err error) {
	var refusedBy string // the rail that refused it, if one did
	defer func() { e.capDecided(r.ID, outcome, refusedBy) }()
	want := policy.ForPlatform(d.NodeActions, e.platformName())
	if len(want) == 0 {
		return "", "", nil, nil
	}
	entry := withRule(entryFor(r, stepQuarantine), d.Rule)
	entry.Node, entry.Platform = node, e.platformName()
	now := e.clock.Now()
	plan := e.state.PlanQuarantine(r.ID, node, want, now)
	toApply := plan.Actions
	entry.Actions = actionNames(toApply)
	skip := func(reason string) (string, string, []string, error) {
		e.record(withDecision(entry, audit.DecisionSkipped, reason))
		return audit.DecisionSkipped, reason, entry.Actions, nil
	}
	// refuse is skip by a rail: audited the same, counted by its rail.
	refuse := func(rail, reason string) (string, string, []string, error) {
		refusedBy = rail
		e.countDecision(ctx, actionQuarantine, outcomeRefused, rail)
		return skip(reason)
	}
	if plan.Skip != "" {
		if plan.Rail != "" {
			return refuse(plan.Rail, plan.Skip)
		}
		e.countDecision(ctx, actionQuarantine, outcomeSkipped, "")
		return skip(plan.Skip)
	}
	req := actuator.Request{Node: node, GPUUUID: r.GPUUUID, FaultID: r.ID, FaultType: string(r.Type),
		Severity: string(r.Severity), Reason: r.IDType() + " " + r.ID, Actions: toApply}

	if e.cfg.DryRun || e.platform == nil {
		platform := e.platformName()
		if platform == "" {
			platform = "no platform configured"
		}
		reason := fmt.Sprintf("would call Quarantine on %s: node=%s actions=[%s] reason=%q gpu=%q",
			platform, node, strings.Join(entry.Actions, ","), req.Reason, req.GPUUUID)
		if !e.cfg.DryRun {
			// Acting, but no platform: the webhook is the only output.
			e.countDecision(ctx, actionQuarantine, outcomeSkipped, "")
			return skip("no platform configured: " + reason)
		}
		e.state.Quarantined(r.ID, node, toApply, true, d.HoldReason)
		e.record(withDecision(entry, audit.DecisionDryRun, reason))
		e.countDecision(ctx, actionQuarantine, outcomeDryRun, "")
		return audit.DecisionDryRun, reason, entry.Actions, nil
	}

	// The platform confirms the node before the breaker is asked: a node it
	// would leave alone (a ghost named by a forged fault, a node without a
	// GPU) never spends the breaker's budget.
	elig, attempts, err := retryCall(ctx, e, timedCall(e, opCheck, func(ctx context.Context) (actuator.Eligibility, error) { return e.platform.Check(ctx, req) }))
	if err != nil {
		// Fail closed: what cannot be read is not acted on; retried with
		// the next record or a redelivery.
		entry.Attempts = attempts
		reason := "platform check failed: " + err.Error()
		e.record(withDecision(entry, audit.DecisionFailed, reason))
		e.countDecision(ctx, actionQuarantine, outcomeFailed, "")
		return audit.DecisionFailed, reason, entry.Actions, fmt.Errorf("remediationexporter: check %s for fault %s: %w", node, r.ID, err)
	}
	if elig.Skip != "" {
		// Final for this fault, as the same answer from Quarantine is.
		entry.Outcome = string(elig.Skip)
		e.state.Quarantined(r.ID, node, toApply, false, "")
		return refuse(railOf(elig.Skip), skipReason(elig.Skip, elig.Detail))
	}
	if reason := e.overQuarantineCap(elig); reason != "" {
		// Not final: the fault waits until the cap has room (quarantinecap.go).
		return e.refuseByQuarantineCap(ctx, r, d, node, reason, refuse)
	}

	// The breaker is consulted before every quarantine; once tripped it
	// stays so until a human resets it.
	breaker := e.platform.Breaker()
	tripped, err := timedCall(e, opBreakerTripped, breaker.Tripped)(ctx)
	if err == nil {
		e.recordBreaker(ctx, tripped)
		e.breakerRead(tripped, "")
	}
	if err == nil && tripped {
		e.watchBreaker()
	}
	if err == nil && !tripped {
		e.breakerAlerted = false // a human reset it: alert on the next trip
		var admitted bool
		admitted, err = timedCall(e, opBreakerAdmit, func(ctx context.Context) (bool, error) { return breaker.Admit(ctx, node, now) })(ctx)
		if err == nil && !admitted {
			// This quarantine spent the budget: the breaker trips here.
			tripped = true
			e.recordBreaker(ctx, true)
			e.breakerTrippedHere(node)
			e.watchBreaker()
			e.telemetry.RemediationBreakerTrips.Add(context.WithoutCancel(ctx), 1, metric.WithAttributeSet(
				attribute.NewSet(attribute.String(metadata.TelemetryAttrPlatform, e.platformName()))))
		}
	}
	if err != nil {
		reason := "circuit breaker unavailable: " + err.Error()
		e.record(withDecision(entry, audit.DecisionFailed, reason))
		e.countDecision(ctx, actionQuarantine, outcomeFailed, "")
		return audit.DecisionFailed, reason, entry.Actions, fmt.Errorf("remediationexporter: fault %s: %w", r.ID, err)
	}
	if tripped {
		outcome, reason, actions, _ := refuse(railBreaker, reasonBreakerTripped)
		return outcome, reason, actions, e.alertBreaker(ctx, r, node)
	}

	res, attempts, err := e.retry(ctx, timedCall(e, opQuarantine, func(ctx context.Context) (actuator.Result, error) { return e.platform.Quarantine(ctx, req) }))
	entry.Attempts, entry.Outcome = attempts, string(res.Outcome)
	if err != nil {
		// Not marked as applied: the next record of the fault (or a
		// redelivery of this batch) tries again.
		reason := err.Error()
		e.record(withDecision(entry, audit.DecisionFailed, reason))
		e.countDecision(ctx, actionQuarantine, outcomeFailed, "")
		return audit.DecisionFailed, reason, entry.Actions, fmt.Errorf("remediationexporter: quarantine %s for fault %s: %w", node, r.ID, err)
	}
	switch res.Outcome {
	case actuator.Applied, actuator.AlreadyDone:
		e.state.Quarantined(r.ID, node, toApply, true, d.HoldReason)
		e.record(withDecision(entry, audit.DecisionActed, res.Detail))
		e.countDecision(ctx, actionQuarantine, outcomeActed, "")
		return audit.DecisionActed, res.Detail, entry.Actions, nil
	default: // foreign, excluded, no GPU, not found: left alone, once for this fault
		// The node changed since Check: the slot it took goes back.
		reason := skipReason(res.Outcome, res.Detail)
		if err := e.breakerCall(ctx, opBreakerRefund, func(ctx context.Context) error { return breaker.Refund(ctx, node, now) }); err != nil {
			reason += "; breaker slot not refunded: " + err.Error()
		}
		e.state.Quarantined(r.ID, node, toApply, false, "")
		return refuse(railOf(res.Outcome), reason)
	}
}

// skipReason is the audit reason of a platform's skip: outcome: detail.
func skipReason(outcome actuator.Outcome, detail string) string {
	if detail == "" {
		return string(outcome)
	}
	return string(outcome) + ": " + detail
}

// retry calls op up to max_attempts times with exponential backoff.
func (e *remediationExporter) retry(ctx context.Context, op func(context.Context) (actuator.Result, error)) (actuator.Result, int, error) {
	return retryCall(ctx, e, op)
}

// retryCall is retry for any platform call.
func retryCall[T any](ctx context.Context, e *remediationExporter, op func(context.Context) (T, error)) (T, int, error) {
	backoff := e.cfg.Backoff.Initial
	for attempt := 1; ; attempt++ {
		res, err := op(ctx)
		if err == nil || attempt >= e.cfg.MaxAttempts || ctx.Err() != nil {
			return res, attempt, err
		}
		if serr := e.sleep(ctx, backoff); serr != nil {
			return res, attempt, errors.Join(err, serr)
		}
		backoff = min(2*backoff, e.cfg.Backoff.Max)
	}
}

// alertBreaker pages once per trip. Callers hold e.mu.
func (e *remediationExporter) alertBreaker(ctx context.Context, r fault.Record, node string) error {
	if e.breakerAlerted {
		return nil
	}
	entry := entryFor(r, stepWebhook)
	entry.Node, entry.Platform = node, e.platformName()
	if e.webhook == nil {
		e.breakerAlerted = true
		e.record(withDecision(entry, audit.DecisionSkipped, "breaker tripped; webhook not configured: page a human another way"))
		return nil
	}
	p := webhook.Payload{Route: "page", Fault: webhook.FaultFromRecord(r), Decision: webhook.Decision{
		Request: string(policy.RequestBreakerTripped), Outcome: audit.DecisionSkipped, Actions: []string{},
		Platform: e.platformName(), Node: node,
		Reason: "breaker tripped: the exporter stopped quarantining nodes; a human must check the cluster and reset the breaker",
	}}
	if err := e.post(ctx, entry, p, r.ID+"/breaker_tripped"); err != nil {
		return err
	}
	e.breakerAlerted = true
	return nil
}
