package remediationexporter

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/audit"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/webhookverify"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

func TestDBEQuarantinesAndPages(t *testing.T) {
	h := newHarness(t)
	dbe := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "xl003", fault.StateOpen)
	require.NoError(t, h.consume(dbe))

	require.Len(t, h.platform.quarantines, 1)
	req := h.platform.quarantines[0]
	assert.Equal(t, "xl003", req.Node)
	assert.Equal(t, dbe.ID, req.FaultID)
	assert.Equal(t, "GPU-xl003-5", req.GPUUUID)
	assert.Equal(t, []actuator.Action{actuator.ActionCordon, actuator.ActionTaint, actuator.ActionCondition}, req.Actions)
	assert.Equal(t, "gpu.memory.dbe "+dbe.ID, req.Reason)

	p := h.hook.got()
	require.Len(t, p, 1)
	assert.Equal(t, "page", p[0].Route)
	assert.Equal(t, "acted", p[0].Decision.Outcome)
	assert.Equal(t, "notify", p[0].Decision.Request)
	assert.Equal(t, []string{"cordon", "taint", "condition"}, p[0].Decision.Actions)
	assert.Equal(t, dbe.ID, p[0].Fault.ID)
	assert.Equal(t, 0, h.hook.badSigs)

	acted := h.auditFor(stepQuarantine, audit.DecisionActed)
	require.Len(t, acted, 1)
	assert.Equal(t, "xl003", acted[0].Node)
	assert.Equal(t, string(actuator.Applied), acted[0].Outcome)
	assert.Len(t, h.auditFor(stepWebhook, audit.DecisionActed), 1)
	assert.Equal(t, 2, h.logs.FilterMessageSnippet("remediation acted").Len(), "every decision is a log line too")
}

func TestDryRunLogsTheExactActionAndCallsNothing(t *testing.T) {
	h := newHarness(t, func(c *Config, _ *dependencies) { c.DryRun = true })
	dbe := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "xl003", fault.StateOpen)
	require.NoError(t, h.consume(dbe))
	h.clock.Advance(time.Hour)
	require.NoError(t, h.consume(withState(dbe, fault.StateResolved)))

	q, r := h.platform.counts()
	assert.Zero(t, q)
	assert.Zero(t, r)
	assert.Empty(t, h.hook.got(), "dry run posts nothing")
	dry := h.auditFor(stepQuarantine, audit.DecisionDryRun)
	require.Len(t, dry, 1)
	assert.Equal(t, `would call Quarantine on kubernetes: node=xl003 actions=[cordon,taint,condition] reason="gpu.memory.dbe `+dbe.ID+`" gpu="GPU-xl003-5"`, dry[0].Reason)
	assert.Len(t, h.auditFor(stepWebhook, audit.DecisionDryRun), 2, "open and resolved")
	assert.Equal(t, 1, h.logs.FilterMessageSnippet("remediation dry_run: quarantine").Len())
}

func TestIdempotentByFaultID(t *testing.T) {
	h := newHarness(t)
	open := faultOn(fault.TypeNVLinkDegraded, fault.SeverityP1, "xl004", fault.StateOpen)
	// A redelivered batch, then an update: one action, one webhook.
	require.NoError(t, h.consume(open))
	require.NoError(t, h.consume(open))
	require.NoError(t, h.consume(withState(open, fault.StateUpdate)))
	q, _ := h.platform.counts()
	assert.Equal(t, 1, q)
	assert.Len(t, h.hook.got(), 1)
	assert.Len(t, h.auditFor(stepQuarantine, audit.DecisionSkipped), 2)

	// Resolved twice, then a late update: nothing more.
	require.NoError(t, h.consume(withState(open, fault.StateResolved)))
	require.NoError(t, h.consume(withState(open, fault.StateResolved)))
	require.NoError(t, h.consume(withState(open, fault.StateUpdate)))
	q, _ = h.platform.counts()
	assert.Equal(t, 1, q)
	assert.Len(t, h.hook.got(), 2, "the open and the resolution")

	// Out of order: the resolved record arrives before the open.
	other := faultOn(fault.TypeGPUUnresponsive, fault.SeverityP1, "xl005", fault.StateResolved)
	require.NoError(t, h.consume(other))
	require.NoError(t, h.consume(withState(other, fault.StateOpen)))
	q, _ = h.platform.counts()
	assert.Equal(t, 1, q, "a fault resolved before its open never acts")
}

func TestEscalationActsOnlyForTheNewActions(t *testing.T) {
	h := newHarness(t)
	trend := faultOn(fault.TypeNVLinkDegraded, fault.SeverityP2, "xl006", fault.StateOpen)
	require.NoError(t, h.consume(trend))
	escalated := withState(trend, fault.StateUpdate)
	escalated.Severity = fault.SeverityP1
	require.NoError(t, h.consume(escalated))
	require.Len(t, h.platform.quarantines, 2)
	assert.Equal(t, []actuator.Action{actuator.ActionTaint, actuator.ActionCondition}, h.platform.quarantines[0].Actions)
	assert.Equal(t, []actuator.Action{actuator.ActionCordon}, h.platform.quarantines[1].Actions)
	p := h.hook.got()
	require.Len(t, p, 2, "chat, then a page for the escalation")
	assert.Equal(t, "chat", p[0].Route)
	assert.Equal(t, "page", p[1].Route)
}

// Each escalation is a delivery of its own: a receiver deduplicating on the
// delivery id (webhookverify.Verifier refuses a repeated id as a replay)
// must not drop a page because a chat about the same fault came before it.
func TestEscalationsHaveTheirOwnDeliveryIDs(t *testing.T) {
	h := newHarness(t)
	r := faultOn(fault.TypeNVLinkDegraded, fault.SeverityP3, "xl015", fault.StateOpen)
	require.NoError(t, h.consume(r))
	for _, sev := range []fault.Severity{fault.SeverityP2, fault.SeverityP1} {
		up := withState(r, fault.StateUpdate)
		up.Severity = sev
		require.NoError(t, h.consume(up))
	}
	h.hook.mu.Lock()
	ids := append([]string(nil), h.hook.deliveries...)
	h.hook.mu.Unlock()
	require.GreaterOrEqual(t, len(ids), 2, "the escalations were posted")
	seen := map[string]bool{}
	for _, id := range ids {
		assert.False(t, seen[id], "delivery id %s posted twice: a receiver would drop the escalation", id)
		seen[id] = true
		assert.True(t, webhookverify.ValidDeliveryID(id), id)
	}
}

func TestOnlyCorrelatorRecordsAreActedOn(t *testing.T) {
	h := newHarness(t)
	dbe := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "xl003", fault.StateOpen)

	// A well-formed fault record under another scope: a pod sent it over
	// OTLP and something let it through.
	require.NoError(t, h.exp.ConsumeLogs(context.Background(), logsOf("otlp/training-pod", dbe)))
	// The same record after the edge renamed it, under the correlator's
	// scope name: it no longer parses.
	forged := logsOf(semconv.ScopeFaultRecords, dbe)
	require.Positive(t, fault.StripForged(forged))
	require.NoError(t, h.exp.ConsumeLogs(context.Background(), forged))
	// Garbage does not panic.
	junk := plog.NewLogs()
	sl := junk.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty()
	sl.Scope().SetName(semconv.ScopeFaultRecords)
	sl.LogRecords().AppendEmpty().Attributes().PutInt("fault.id", 7)
	require.NoError(t, h.exp.ConsumeLogs(context.Background(), junk))

	q, _ := h.platform.counts()
	assert.Zero(t, q)
	assert.Empty(t, h.hook.got())
	skipped := h.auditFor(stepRecord, audit.DecisionSkipped)
	require.Len(t, skipped, 3)
	for _, e := range skipped {
		assert.Contains(t, e.Reason, "not a correlator record")
	}
}

func TestOnlyTheLeaderActs(t *testing.T) {
	leader := &flagLeader{}
	h := newHarness(t, func(_ *Config, d *dependencies) { d.leader = leader })
	dbe := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "xl003", fault.StateOpen)
	require.NoError(t, h.consume(dbe))
	q, _ := h.platform.counts()
	assert.Zero(t, q)
	assert.Empty(t, h.hook.got())
	require.Len(t, h.auditFor(stepRecord, audit.DecisionSkipped), 1)
	assert.Equal(t, "not the leader", h.auditFor(stepRecord, audit.DecisionSkipped)[0].Reason)

	// Leadership moves here: the next record of the fault acts.
	leader.set(true)
	require.NoError(t, h.consume(withState(dbe, fault.StateUpdate)))
	q, _ = h.platform.counts()
	assert.Equal(t, 1, q)
}

func TestBreakerStopsQuarantiningAndPagesOnce(t *testing.T) {
	h := newHarness(t)
	h.platform.breaker.budget = 2
	var recs []fault.Record
	for _, n := range []string{"n1", "n2", "n3", "n4", "n5"} {
		recs = append(recs, faultOn(fault.TypeGPUFellOffBus, fault.SeverityP1, n, fault.StateOpen))
	}
	require.NoError(t, h.consume(recs...))
	q, _ := h.platform.counts()
	assert.Equal(t, 2, q)
	var breakerPages, faultPages int
	for _, p := range h.hook.got() {
		if p.Decision.Request == "breaker_tripped" {
			breakerPages++
			assert.Equal(t, "page", p.Route)
		} else {
			faultPages++
		}
	}
	assert.Equal(t, 1, breakerPages, "one page per trip")
	assert.Equal(t, 5, faultPages, "every fault still reaches the webhook")
	skipped := h.auditFor(stepQuarantine, audit.DecisionSkipped)
	require.Len(t, skipped, 3)
	assert.Contains(t, skipped[0].Reason, "circuit breaker tripped")

	// A human resets it: quarantining resumes and a new trip pages again.
	require.NoError(t, h.platform.breaker.Reset(context.Background()))
	h.platform.breaker.budget = 0
	require.NoError(t, h.consume(faultOn(fault.TypeGPUFellOffBus, fault.SeverityP1, "n6", fault.StateOpen)))
	breakerPages = 0
	for _, p := range h.hook.got() {
		if p.Decision.Request == "breaker_tripped" {
			breakerPages++
		}
	}
	assert.Equal(t, 2, breakerPages)
}

func TestPlatformSkipsAreAuditedAndFinal(t *testing.T) {
	for _, outcome := range []actuator.Outcome{actuator.SkipExcluded, actuator.SkipForeign, actuator.SkipNotFound} {
		t.Run(string(outcome), func(t *testing.T) {
			h := newHarness(t)
			h.platform.outcome = outcome
			r := faultOn(fault.TypeGPUUnresponsive, fault.SeverityP1, "maint1", fault.StateOpen)
			require.NoError(t, h.consume(r, withState(r, fault.StateUpdate)))
			q, _ := h.platform.counts()
			assert.Equal(t, 1, q, "left alone, and not asked again for the same fault")
			skipped := h.auditFor(stepQuarantine, audit.DecisionSkipped)
			require.NotEmpty(t, skipped)
			assert.Equal(t, string(outcome), skipped[0].Outcome)
			// A resolved record releases nothing: it never was ours.
			require.NoError(t, h.consume(withState(r, fault.StateResolved)))
			h.clock.Advance(time.Hour)
			_, rel := h.platform.counts()
			assert.Zero(t, rel)
		})
	}
}

func TestPlatformErrorsAreRetried(t *testing.T) {
	var waits []time.Duration
	h := newHarness(t, func(c *Config, d *dependencies) {
		c.MaxAttempts = 3
		d.sleep = func(_ context.Context, w time.Duration) error { waits = append(waits, w); return nil }
	})
	h.platform.failNext = 2
	r := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "xl003", fault.StateOpen)
	require.NoError(t, h.consume(r))
	acted := h.auditFor(stepQuarantine, audit.DecisionActed)
	require.Len(t, acted, 1)
	assert.Equal(t, 3, acted[0].Attempts)
	assert.Equal(t, []time.Duration{time.Second, 2 * time.Second}, waits)

	// Down for longer than the attempts: failed, reported, and the
	// redelivered batch tries again.
	h.platform.failNext = 3
	r2 := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "xl007", fault.StateOpen)
	err := h.consume(r2)
	require.ErrorIs(t, err, errAPIServerDown)
	require.Len(t, h.auditFor(stepQuarantine, audit.DecisionFailed), 1)
	require.NoError(t, h.consume(r2))
	assert.Len(t, h.auditFor(stepQuarantine, audit.DecisionActed), 2)
	assert.Len(t, h.hook.got(), 2, "the webhook went out once per fault, with the failure the first time")
}

func TestReturnToServiceAfterVerificationWindow(t *testing.T) {
	h := newHarness(t)
	r := faultOn(fault.TypeNVLinkDegraded, fault.SeverityP1, "xl008", fault.StateOpen)
	require.NoError(t, h.consume(r))
	require.NoError(t, h.consume(withState(r, fault.StateResolved)))
	_, rel := h.platform.counts()
	require.Zero(t, rel, "not before the verification window")
	h.clock.Advance(29 * time.Minute)
	_, rel = h.platform.counts()
	require.Zero(t, rel)
	h.clock.Advance(time.Minute)
	_, rel = h.platform.counts()
	require.Equal(t, 1, rel)
	assert.Equal(t, "xl008", h.platform.releases[0].Node)
	assert.Equal(t, []actuator.Action{actuator.ActionCordon, actuator.ActionTaint, actuator.ActionCondition}, h.platform.releases[0].Actions)
	assert.Len(t, h.auditFor(stepRelease, audit.DecisionActed), 1)

	// Cooldown: a new fault right after the return is not acted on...
	again := faultOn(fault.TypeGPUUnresponsive, fault.SeverityP1, "xl008", fault.StateOpen)
	require.NoError(t, h.consume(again))
	q, _ := h.platform.counts()
	assert.Equal(t, 1, q)
	skipped := h.auditFor(stepQuarantine, audit.DecisionSkipped)
	require.Len(t, skipped, 1)
	assert.Contains(t, skipped[0].Reason, "cooldown")
	// ...and after it, the next record of that fault is.
	h.clock.Advance(31 * time.Minute)
	require.NoError(t, h.consume(withState(again, fault.StateUpdate)))
	q, _ = h.platform.counts()
	assert.Equal(t, 2, q)
}

func TestNewFaultCancelsReturnToService(t *testing.T) {
	h := newHarness(t)
	r := faultOn(fault.TypeNVLinkDegraded, fault.SeverityP1, "xl009", fault.StateOpen)
	require.NoError(t, h.consume(r, withState(r, fault.StateResolved)))
	require.Equal(t, 1, h.clock.pending())
	h.clock.Advance(10 * time.Minute)
	require.NoError(t, h.consume(faultOn(fault.TypeGPUThermal, fault.SeverityP3, "xl009", fault.StateOpen)))
	assert.Zero(t, h.clock.pending())
	h.clock.Advance(time.Hour)
	_, rel := h.platform.counts()
	assert.Zero(t, rel)
	cancelled := h.auditFor(stepRelease, audit.DecisionSkipped)
	require.Len(t, cancelled, 1)
	assert.Contains(t, cancelled[0].Reason, "cancelled")
}

// A verification window's timer that fired but had not yet taken the lock
// when a new fault cancelled the release, and the node's faults resolved
// again, must not release the node: the new window has just started.
func TestLateTimerOfACancelledWindowDoesNotRelease(t *testing.T) {
	h := newHarness(t)
	first := faultOn(fault.TypeNVLinkDegraded, fault.SeverityP1, "xl014", fault.StateOpen)
	require.NoError(t, h.consume(first, withState(first, fault.StateResolved)))
	late := h.clock.AdvanceLate(30 * time.Minute)
	require.Len(t, late, 1, "the first window's timer fired")

	second := faultOn(fault.TypeGPUThermal, fault.SeverityP3, "xl014", fault.StateOpen)
	require.NoError(t, h.consume(second, withState(second, fault.StateResolved)))
	require.Equal(t, 1, h.clock.pending(), "a new window runs")

	for _, f := range late {
		f() // the first window's timer finally gets the lock
	}
	_, rel := h.platform.counts()
	assert.Zero(t, rel, "released by the timer of a cancelled window")

	h.clock.Advance(30 * time.Minute)
	_, rel = h.platform.counts()
	assert.Equal(t, 1, rel, "released when the new window ends")
}

func TestNeverAutomaticReturnAfterDBEOrXID79(t *testing.T) {
	for _, typ := range []fault.Type{fault.TypeGPUMemoryDBE, fault.TypeGPUFellOffBus} {
		t.Run(string(typ), func(t *testing.T) {
			h := newHarness(t)
			r := faultOn(typ, fault.SeverityP1, "xl010", fault.StateOpen)
			require.NoError(t, h.consume(r, withState(r, fault.StateResolved)))
			h.clock.Advance(24 * time.Hour)
			_, rel := h.platform.counts()
			assert.Zero(t, rel)
			held := h.auditFor(stepRelease, audit.DecisionSkipped)
			require.Len(t, held, 1)
			assert.Contains(t, held[0].Reason, "waits for a human")
		})
	}
	// XID 94 on a gpu.xid record, and a DBE on a node that also had a
	// releasable fault: the hold wins.
	h := newHarness(t)
	xid := faultOn(fault.TypeGPUXID, fault.SeverityP1, "xl011", fault.StateOpen)
	xid.XID = 94
	xid.ID = xid.ComputeID(fault.DefaultBucket)
	nv := faultOn(fault.TypeNVLinkDegraded, fault.SeverityP1, "xl011", fault.StateOpen)
	require.NoError(t, h.consume(xid, nv, withState(nv, fault.StateResolved), withState(xid, fault.StateResolved)))
	h.clock.Advance(24 * time.Hour)
	_, rel := h.platform.counts()
	assert.Zero(t, rel)
}

func TestJobLevelAndRMARequestsGoToTheWebhookOnly(t *testing.T) {
	h := newHarness(t)
	xid13 := faultOn(fault.TypeGPUXID, fault.SeverityP3, "xl012", fault.StateOpen)
	xid13.XID, xid13.Action = 13, fault.ActionRestartApp
	xid13.ID = xid13.ComputeID(fault.DefaultBucket)
	rma := faultOn(fault.TypeGPUECCSBERate, fault.SeverityP3, "xl013", fault.StateOpen)
	rma.Action = fault.ActionRMAReview
	rma.Evidence = []fault.Evidence{
		{Signal: semconv.MetricGPUECCErrors, Value: 120, Time: rma.FirstSeen},
		{Signal: semconv.MetricGPUECCErrors, Value: 180, Time: rma.LastSeen},
		{Signal: semconv.MetricGPUXIDLast, Value: 92, Time: rma.FirstSeen.Add(time.Second)},
	}
	rma.ID = rma.ComputeID(fault.DefaultBucket)
	require.NoError(t, h.consume(xid13, rma))
	q, _ := h.platform.counts()
	assert.Zero(t, q, "no node action")
	p := h.hook.got()
	require.Len(t, p, 2)
	assert.Equal(t, "restart_app", p[0].Decision.Request)
	assert.Equal(t, "record", p[0].Route)
	assert.Equal(t, "human_approval", p[1].Decision.Request)
	assert.Equal(t, "none", p[1].Decision.Outcome)
	// The RMA review carries the evidence bundle; the restart request none.
	assert.Nil(t, p[0].EvidenceBundle)
	b := p[1].EvidenceBundle
	require.NotNil(t, b, "the rma_review request's evidence bundle")
	assert.Equal(t, "xl013", b.Node)
	assert.Equal(t, []string{rma.ID}, b.FaultIDs)
	require.Len(t, b.Faults, 1)
	assert.Equal(t, rma.ID, b.Faults[0].ID)
	require.NotEmpty(t, b.Readings)
	assert.Equal(t, semconv.MetricGPUECCErrors, b.Readings[0].Signal)
	assert.EqualValues(t, 180, b.Readings[0].Value, "the last reading of the signal")
	require.Len(t, b.XIDHistory, 1)
	assert.Equal(t, 92, b.XIDHistory[0].XID)
	assert.Empty(t, b.Steps, "no repair loop")
}

func TestWebhookFailureIsRetriedAndReported(t *testing.T) {
	h := newHarness(t)
	h.hook.fail = 2
	r := faultOn(fault.TypeGPUThermal, fault.SeverityP2, "xl014", fault.StateOpen)
	require.NoError(t, h.consume(r))
	sent := h.auditFor(stepWebhook, audit.DecisionActed)
	require.Len(t, sent, 1)
	assert.Equal(t, 3, sent[0].Attempts)

	h.hook.fail = 100
	r2 := faultOn(fault.TypeGPUThermal, fault.SeverityP2, "xl015", fault.StateOpen)
	require.Error(t, h.consume(r2))
	require.Len(t, h.auditFor(stepWebhook, audit.DecisionFailed), 1)
	h.hook.fail = 0
	require.NoError(t, h.consume(r2), "redelivery sends it")
	assert.Len(t, h.auditFor(stepWebhook, audit.DecisionActed), 2)
	q, _ := h.platform.counts()
	assert.Equal(t, 2, q, "the node action was not repeated")
}

func TestShutdownWaitsForInFlightActions(t *testing.T) {
	h := newHarness(t)
	h.platform.block = make(chan struct{})
	h.platform.entered = make(chan struct{}, 1)
	consumed := make(chan error, 1)
	go func() {
		consumed <- h.consume(faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "xl016", fault.StateOpen))
	}()
	<-h.platform.entered
	shut := make(chan error, 1)
	go func() { shut <- h.exp.Shutdown(context.Background()) }()
	// Wait until Shutdown began (it refuses new work from then on).
	for closing := false; !closing; {
		runtime.Gosched()
		h.exp.lifeMu.Lock()
		closing = h.exp.closing
		h.exp.lifeMu.Unlock()
	}
	require.ErrorIs(t, h.consume(faultOn(fault.TypeGPUThermal, fault.SeverityP2, "x", fault.StateOpen)), errShuttingDown)
	select {
	case <-shut:
		t.Fatal("Shutdown returned while an action was in flight")
	default:
	}
	close(h.platform.block)
	require.NoError(t, <-consumed)
	require.NoError(t, <-shut)
	q, _ := h.platform.counts()
	assert.Equal(t, 1, q)
}

func TestShutdownDeadlineCancelsInFlight(t *testing.T) {
	h := newHarness(t)
	h.platform.block = make(chan struct{})
	h.platform.entered = make(chan struct{}, 1)
	consumed := make(chan error, 1)
	go func() {
		consumed <- h.consume(faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "xl017", fault.StateOpen))
	}()
	<-h.platform.entered
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, h.exp.Shutdown(ctx), context.Canceled)
	assert.Error(t, <-consumed)
	assert.Len(t, h.auditFor(stepQuarantine, audit.DecisionFailed), 1)
}

// The collector's shutdown context never ends: a platform that does not
// answer is cancelled after shutdownWait, and the record's action is
// audited as failed (its record, uncommitted, is decided again).
func TestShutdownBoundsAPlatformThatDoesNotAnswer(t *testing.T) {
	h := newHarness(t)
	h.exp.shutdownWait = 20 * time.Millisecond
	h.platform.block = make(chan struct{}) // never closed: only the context ends the call
	h.platform.entered = make(chan struct{}, 1)
	consumed := make(chan error, 1)
	go func() {
		consumed <- h.consume(faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "xl019", fault.StateOpen))
	}()
	<-h.platform.entered
	require.NoError(t, h.exp.Shutdown(context.Background()))
	assert.Error(t, <-consumed)
	assert.Len(t, h.auditFor(stepQuarantine, audit.DecisionFailed), 1)
}

func TestShutdownStopsPendingReturns(t *testing.T) {
	h := newHarness(t)
	r := faultOn(fault.TypeNVLinkDegraded, fault.SeverityP1, "xl018", fault.StateOpen)
	require.NoError(t, h.consume(r, withState(r, fault.StateResolved)))
	require.Equal(t, 1, h.clock.pending())
	require.NoError(t, h.exp.Shutdown(context.Background()))
	assert.Zero(t, h.clock.pending())
	h.clock.Advance(time.Hour)
	_, rel := h.platform.counts()
	assert.Zero(t, rel)
}

func TestCancelledContextActsOnNothing(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := h.exp.ConsumeLogs(ctx, logsOf(semconv.ScopeFaultRecords, faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "xl019", fault.StateOpen)))
	assert.ErrorIs(t, err, context.Canceled)
	q, _ := h.platform.counts()
	assert.Zero(t, q)
}

func TestRecordWithoutNode(t *testing.T) {
	h := newHarness(t)
	r := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "", fault.StateOpen)
	require.NoError(t, h.consume(r))
	q, _ := h.platform.counts()
	assert.Zero(t, q)
	skipped := h.auditFor(stepQuarantine, audit.DecisionSkipped)
	require.Len(t, skipped, 1)
	assert.Equal(t, "the record names no node", skipped[0].Reason)
	assert.Len(t, h.hook.got(), 1, "a human still hears of it")
}
