package remediationexporter // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter"

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/audit"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/decisionlog"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/lifecycle"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

// maxUnpublished bounds the decisions acted on whose publish failed and
// whose record has not come back; past it they are forgotten (a
// redelivery then acts again, idempotently).
const maxUnpublished = 10_000

// unpublished is a decision made here and not yet in the log: its entries
// wait for the redelivery of its record, which publishes them instead of
// deciding again.
type unpublished struct {
	entries []audit.Entry
	handled bool // handle returned nil: only the publish is left
}

// decisionKey is what makes a new decision about a record: the fault, its
// state and its severity (an escalation is a decision of its own). It is
// the webhook's delivery id (notify.go) without the request, which the
// policy derives from the same record.
func decisionKey(r fault.Record) string {
	return r.ID + "/" + string(r.State) + "/" + string(r.Severity)
}

// decide handles one record once across the replicas that share the
// decision log: catch up with the log, skip a key decided already, else
// act, publish the decision and wait for it, then audit it here. A kill
// before the publish repeats only idempotent actions on the next owner; a
// kill after it is skipped there. Callers hold e.mu.
func (e *remediationExporter) decide(ctx context.Context, r fault.Record) error {
	if e.decisions == nil {
		return e.handle(ctx, r)
	}
	key := decisionKey(r)
	if err := e.notOwner(); err != nil {
		// A record in hand while the partitions moved (the session was
		// lost): decided by nobody here, nothing published, so the new
		// owner decides it when it reads the record again (its commit
		// here fails with the old generation).
		entry := withDecision(entryFor(r, stepRecord), audit.DecisionSkipped, "not the replica that acts: "+err.Error())
		entry.DecisionKey = key
		e.record(entry)
		return nil
	}
	lctx, cancel := context.WithTimeout(ctx, e.cfg.Decisions.Timeout)
	defer cancel()
	if err := e.catchUp(lctx); err != nil {
		e.record(withDecision(entryFor(r, stepRecord), audit.DecisionFailed,
			"decision log unavailable: not decided, the record is refused for redelivery: "+err.Error()))
		return fmt.Errorf("remediationexporter: fault %s: %w", r.ID, err)
	}
	if d, ok := e.decisions.Lookup(key); ok {
		delete(e.unpublished, key)
		entry := withDecision(entryFor(r, stepRecord), audit.DecisionSkipped, "decided by "+d.Replica)
		entry.DecisionKey, entry.Replica = key, d.Replica
		e.record(entry)
		e.telemetry.RemediationDecisionLogSkipped.Add(ctx, 1)
		return nil
	}

	p := e.unpublished[key]
	if p == nil {
		if len(e.unpublished) >= maxUnpublished {
			e.logger.Warn("remediation: too many decisions waiting to be published; forgetting them (their redeliveries act again)",
				zap.Int("unpublished", len(e.unpublished)))
			clear(e.unpublished)
		}
		p = &unpublished{}
		e.unpublished[key] = p
	}
	if !p.handled {
		entries, err := e.collect(func() error { return e.handle(ctx, r) })
		for _, entry := range entries {
			if entry.Decision == audit.DecisionFailed {
				// An attempt, not a decision: audited now, retried on
				// redelivery.
				e.record(entry)
				continue
			}
			entry.DecisionKey, entry.Replica = key, e.replica
			p.entries = append(p.entries, entry)
		}
		if err != nil {
			return err
		}
		p.handled = true
	}

	d := decisionlog.Decision{Key: key, FaultID: r.ID, Replica: e.replica, Time: e.clock.Now().UTC(), Entries: p.entries}
	if err := e.decisions.Publish(lctx, d); err != nil {
		e.record(withDecision(entryFor(r, stepRecord), audit.DecisionFailed,
			"decision not published to the decision log: the record is refused for redelivery: "+err.Error()))
		return fmt.Errorf("remediationexporter: fault %s: %w", r.ID, err)
	}
	delete(e.unpublished, key)
	e.telemetry.RemediationDecisionLogPublished.Add(ctx, 1)
	e.countEvicted(ctx)
	for _, entry := range p.entries {
		e.record(entry)
	}
	return nil
}

// collect runs fn with the audit entries it records held back and returns
// them. Callers hold e.mu.
func (e *remediationExporter) collect(fn func() error) ([]audit.Entry, error) {
	var held []audit.Entry
	e.holding = &held
	defer func() { e.holding = nil }()
	err := fn()
	return held, err
}

// catchUp reads the decision log to its end and restores, from the
// decisions of other replicas (and earlier lives), what keeps this one
// idempotent should it take over: the quarantines, webhooks and releases
// they did. Callers hold e.mu.
func (e *remediationExporter) catchUp(ctx context.Context) error {
	now := e.clock.Now()
	read, err := e.decisions.CatchUp(ctx, now)
	e.countEvicted(ctx)
	horizon := now.Add(-lifecycle.OpenRetention)
	for _, d := range read {
		if d.Replica == e.replica {
			continue // applied when made
		}
		for _, entry := range d.Entries {
			if !entry.Time.Before(horizon) {
				e.restore(entry)
			}
		}
	}
	return err
}

// warmUp reads the decision log once at start, so that a replica that
// takes over later has only the tail to read. Best effort: the catch-up
// before each decision is what counts.
func (e *remediationExporter) warmUp() {
	defer e.inFlight.Done()
	e.mu.Lock()
	defer e.mu.Unlock()
	ctx, cancel := context.WithTimeout(e.lifeCtx, e.cfg.Decisions.Timeout)
	defer cancel()
	err := e.catchUp(ctx)
	e.recordQuarantined() // the quarantines the other replicas' decisions hold
	if err != nil {
		e.logger.Warn("remediation: decision log not read at start; the first decision catches up", zap.Error(err))
		return
	}
	e.logger.Info("remediation: decision log read", zap.String("topic", e.cfg.Decisions.Topic),
		zap.Int("decided_keys", e.decisions.Len()), zap.String("replica", e.replica))
}

// countEvicted adds the decision log's new evictions to their counter.
// Callers hold e.mu.
func (e *remediationExporter) countEvicted(ctx context.Context) {
	if n := e.decisions.Evicted(); n > e.evictedSeen {
		e.telemetry.RemediationDecisionLogKeysEvicted.Add(ctx, n-e.evictedSeen)
		e.evictedSeen = n
	}
}
