package remediationexporter // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter"

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/audit"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/policy"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/webhook"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

// notify sends the record and the node step's outcome to the webhook: once
// per fault, again only when its severity rises (the route changes).
// Callers hold e.mu.
func (e *remediationExporter) notify(ctx context.Context, r fault.Record, d policy.Decision, node, outcome, reason string, actions []string) error {
	entry := withRule(entryFor(r, stepWebhook), d.Rule)
	entry.Node, entry.Platform = node, e.platformName()
	if !e.state.WebhookDue(r.ID, r.Severity) {
		e.record(withDecision(entry, audit.DecisionSkipped, "duplicate: webhook already sent for this fault"))
		return nil
	}
	if v := e.admitPost(ctx, entry, r, node); !v.OK {
		return nil
	}
	if outcome == "" {
		outcome = "none"
	}
	if actions == nil {
		actions = []string{}
	}
	p := webhook.Payload{Route: policy.Route(r.Severity), Fault: webhook.FaultFromRecord(r), Decision: webhook.Decision{
		Request: string(d.Request), Outcome: outcome, Actions: actions, Platform: e.platformName(), Node: node,
		Reason: reason, Rule: d.Rule, DryRun: e.cfg.DryRun,
	}}
	if d.Request == policy.RequestHumanApproval && r.State == fault.StateOpen {
		// An RMA review: the human gets the evidence with the request.
		bundle := e.rmaReviewBundle(r, node)
		p.EvidenceBundle = &bundle
	}
	if e.cfg.DryRun {
		body, _ := json.Marshal(p)
		e.state.WebhookSent(r.ID, r.Severity)
		e.record(withDecision(entry, audit.DecisionDryRun, "would post to the webhook: "+string(body)))
		return nil
	}
	if e.webhook == nil {
		e.record(withDecision(entry, audit.DecisionSkipped, "webhook not configured"))
		return nil
	}
	// The severity is part of the id: an escalation (one more webhook when
	// the severity rises) is a delivery of its own, which a receiver that
	// deduplicates on the id must not drop; a repost of the same record
	// (a retry, a replay after failover) keeps its id.
	delivery := r.ID + "/" + string(r.State) + "/" + string(d.Request) + "/" + string(r.Severity)
	if err := e.post(ctx, entry, p, delivery); err != nil {
		return err
	}
	e.state.WebhookSent(r.ID, r.Severity)
	return nil
}

// admitPost applies the webhook's caps (per node, per source on a node,
// pages per node) to the post about r. A refused post is audited with the
// cap, counted by the client, logged once per flood, and not sent; the
// node action has already happened and nothing is returned to retry: a
// retry would only be refused again. Nothing is capped without a webhook
// client. The fault stays due, so a later record of it (an update, an
// escalation) is posted once its bucket has refilled. Callers hold e.mu.
func (e *remediationExporter) admitPost(ctx context.Context, entry audit.Entry, r fault.Record, node string) webhook.Verdict {
	if e.webhook == nil {
		return webhook.Verdict{OK: true}
	}
	v := e.webhook.Admit(ctx, webhook.Post{Node: node, Source: r.IDType(), Page: policy.Route(r.Severity) == "page"})
	if v.OK {
		return v
	}
	e.record(withDecision(entry, audit.DecisionSkipped, v.Reason))
	if v.First {
		e.logger.Warn("webhook posts capped: further posts over this cap are audited, not logged",
			zap.String("node", node), zap.String("source", r.IDType()), zap.String("cap", v.Cap), zap.String("reason", v.Reason))
	}
	return v
}

// notifyResolved sends a fault's resolution to the webhook that heard of
// it. Callers hold e.mu.
func (e *remediationExporter) notifyResolved(ctx context.Context, r fault.Record, node string) error {
	d := policy.Decision{Rule: "", Request: policy.RequestNotify}
	entry := entryFor(r, stepWebhook)
	entry.Node = node
	p := webhook.Payload{Route: policy.Route(r.Severity), Fault: webhook.FaultFromRecord(r), Decision: webhook.Decision{
		Request: string(d.Request), Outcome: "resolved", Actions: []string{}, Platform: e.platformName(), Node: node,
		DryRun: e.cfg.DryRun,
	}}
	switch {
	case e.cfg.DryRun:
		e.record(withDecision(entry, audit.DecisionDryRun, "would post the resolution to the webhook"))
		return nil
	case e.webhook == nil:
		return nil
	}
	return e.post(ctx, entry, p, r.ID+"/resolved/notify")
}

// post signs and sends p, retried by the webhook client; delivery is its
// idempotency key for the receiver, signed with the body (webhookverify),
// so it must stay within webhookverify.ValidDeliveryID.
func (e *remediationExporter) post(ctx context.Context, entry audit.Entry, p webhook.Payload, delivery string) error {
	p.SentAt = e.clock.Now().UTC().Format(time.RFC3339Nano)
	body, err := json.Marshal(p)
	if err != nil {
		e.record(withDecision(entry, audit.DecisionFailed, err.Error()))
		return err
	}
	attempts, err := e.webhook.Send(ctx, body, delivery)
	entry.Attempts = attempts
	if err != nil {
		e.record(withDecision(entry, audit.DecisionFailed, err.Error()))
		return fmt.Errorf("remediationexporter: webhook for fault %s: %w", entry.FaultID, err)
	}
	e.record(withDecision(entry, audit.DecisionActed, "posted ("+p.Route+", "+p.Decision.Request+")"))
	return nil
}
