package remediationexporter

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/audit"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

// The quarantine cap tells someone (quarantinecap.go): its refusals are
// counted, the faults it refused wait (a gauge, the console), the breaker
// trips when configured, and the waiting faults act once there is room.

func (b *memBreaker) Trip(context.Context, time.Time, string) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tripped {
		return false, nil
	}
	b.tripped = true
	return true, nil
}

func (b *memBreaker) isTripped() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.tripped
}

const (
	mCapRefusals = "otelcol_remediation_quarantine_cap_refusals"
	mCapWaiting  = "otelcol_remediation_quarantine_cap_waiting"
)

func withoutCapTrip(c *Config, _ *dependencies) { c.QuarantineCapTripsBreaker = false }

// waiting reads the waiting gauge of one severity on Kubernetes.
func (h *harness) waiting(sev fault.Severity) int64 {
	h.t.Helper()
	return h.value(mCapWaiting, "platform", "kubernetes", "severity", string(sev))
}

// setHeld marks node quarantined (or not) on the platform, as a human's
// action outside the exporter would.
func (p *memPlatform) setHeld(node string, on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hold(node, on)
}

func (p *memPlatform) quarantinedNodes() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, q := range p.quarantines {
		out = append(out, q.Node)
	}
	return out
}

func breakerPages(h *harness) int {
	n := 0
	for _, p := range h.hook.got() {
		if p.Decision.Request == "breaker_tripped" {
			n++
		}
	}
	return n
}

// Forged-looking P1s on 10 of 100 GPU nodes are acted on; a genuine DBE on
// another is refused by the cap: counted, waiting, the breaker trips and
// pages, the console sees it. A reset does not trip again for the same
// fault; a new refused fault does. Released and reset, the DBE acts.
func TestQuarantineCapTellsSomeone(t *testing.T) {
	h := newHarness(t, withConsole)
	h.platform.gpuNodes = 100
	ctx := context.Background()
	ctl := h.console.ctl(t)

	var forged []fault.Record
	for i := range 10 {
		forged = append(forged, faultOn(fault.TypeGPUUnresponsive, fault.SeverityP1, fmt.Sprintf("gpu%03d", i), fault.StateOpen))
	}
	require.NoError(t, h.consume(forged...))
	require.Len(t, h.platform.quarantinedNodes(), 10)
	assert.Zero(t, h.waiting(fault.SeverityP1))
	_, recorded := h.snapshot()[mCapWaiting]
	assert.True(t, recorded, "the waiting gauge is recorded before any refusal")

	dbe := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "gpu050", fault.StateOpen)
	require.NoError(t, h.consume(dbe))
	assert.Len(t, h.platform.quarantinedNodes(), 10, "the DBE is refused")
	capped := auditEntries(t, h.auditLog, stepOn(stepQuarantine, audit.DecisionSkipped, "gpu050"))
	require.Len(t, capped, 1)
	assert.Equal(t, "quarantine cap: 10 of 100 GPU nodes already quarantined by this exporter (max_quarantined_fraction 0.1 allows 10)", capped[0].Reason)
	assert.Equal(t, int64(1), h.value(mCapRefusals, "platform", "kubernetes", "severity", "P1"))
	assert.Equal(t, int64(1), h.value(mDecisions, "action", "quarantine", "outcome", "refused", "rail", "quarantine_cap"))
	assert.Equal(t, int64(1), h.waiting(fault.SeverityP1))
	assert.Zero(t, h.waiting(fault.SeverityP2))
	assert.Equal(t, 1, h.logs.FilterMessageSnippet("the quarantine cap refused a fault").Len(), "logged once")

	// The breaker trips, audited with the cap named, counted and paged.
	assert.True(t, h.platform.breaker.isTripped())
	assert.Equal(t, int64(1), h.value(mTrips, onKubernetes...))
	assert.Equal(t, int64(1), h.value(mTripped, onKubernetes...))
	trips := auditEntries(t, h.auditLog, func(e audit.Entry) bool {
		return e.Step == stepBreaker && e.Event == breakerEventTripped && e.Decision == audit.DecisionActed
	})
	require.Len(t, trips, 1)
	assert.Equal(t, dbe.ID, trips[0].FaultID)
	assert.Equal(t, "gpu050", trips[0].Node)
	assert.Equal(t, "circuit breaker tripped by the quarantine cap: gpu.memory.dbe "+dbe.ID+" (P1) on gpu050 refused, "+
		"10 of 100 GPU nodes already quarantined by this exporter (max_quarantined_fraction 0.1 allows 10); quarantining stopped until a human resets it",
		trips[0].Reason)
	assert.Equal(t, 1, breakerPages(h))
	var dbePage bool
	for _, p := range h.hook.got() {
		if p.Fault.ID == dbe.ID && p.Decision.Request != "breaker_tripped" {
			dbePage = true
			assert.Equal(t, audit.DecisionSkipped, p.Decision.Outcome)
			assert.Contains(t, p.Decision.Reason, "quarantine cap: 10 of 100")
		}
	}
	assert.True(t, dbePage, "the DBE's own page says it was refused")

	// The console: the breaker tripped by the cap, the DBE waiting, 10 of 10 held.
	b, err := ctl.Breaker(ctx)
	require.NoError(t, err)
	assert.True(t, b.Tripped)
	require.NotEmpty(t, b.History)
	assert.Contains(t, b.History[len(b.History)-1].Reason, "tripped by the quarantine cap")
	require.NotNil(t, b.QuarantineCap)
	c := b.QuarantineCap
	assert.Equal(t, 10, c.Held)
	assert.Equal(t, 10, c.Limit)
	assert.Equal(t, 100, c.GPUNodes)
	assert.InDelta(t, 0.1, c.Fraction, 0)
	assert.True(t, c.TripsBreaker)
	require.Len(t, c.Waiting, 1)
	assert.Equal(t, dbe.ID, c.Waiting[0].FaultID)
	assert.Equal(t, "gpu050", c.Waiting[0].Node)
	assert.Equal(t, "P1", c.Waiting[0].Severity)
	assert.Equal(t, "gpu.memory.dbe", c.Waiting[0].Type)

	// Reset without room: the DBE still waits, and neither its retry nor
	// its next record trips the breaker again (a human decided).
	require.NoError(t, ctl.ResetBreaker(ctx, operator))
	h.clock.Advance(0)
	require.NoError(t, h.consume(withState(dbe, fault.StateUpdate)))
	assert.False(t, h.platform.breaker.isTripped(), "no second trip for a fault a human has seen")
	assert.Equal(t, int64(2), h.value(mCapRefusals, "platform", "kubernetes", "severity", "P1"))
	assert.Equal(t, int64(1), h.waiting(fault.SeverityP1))
	assert.Equal(t, int64(1), h.value(mTrips, onKubernetes...))

	// A new fault the cap refuses trips it again.
	p2 := faultOn(fault.TypeNVLinkDegraded, fault.SeverityP2, "gpu060", fault.StateOpen)
	require.NoError(t, h.consume(p2))
	assert.True(t, h.platform.breaker.isTripped())
	assert.Equal(t, int64(2), h.value(mTrips, onKubernetes...))
	assert.Equal(t, int64(1), h.waiting(fault.SeverityP2))
	assert.Equal(t, 2, breakerPages(h))

	// A forged node released: room for one, but the breaker is tripped:
	// nothing acts until a human resets it.
	_, err = ctl.Release(ctx, "gpu003", operator)
	require.NoError(t, err)
	h.clock.Advance(0)
	assert.Len(t, h.platform.quarantinedNodes(), 10)
	assert.Equal(t, int64(1), h.waiting(fault.SeverityP1))

	// Reset: the DBE, most severe and oldest, acts at once; the P2 waits.
	require.NoError(t, ctl.ResetBreaker(ctx, operator))
	h.clock.Advance(0)
	q := h.platform.quarantinedNodes()
	require.Len(t, q, 11)
	assert.Equal(t, "gpu050", q[10])
	assert.Zero(t, h.waiting(fault.SeverityP1))
	assert.Equal(t, int64(1), h.waiting(fault.SeverityP2))
	assert.Len(t, auditEntries(t, h.auditLog, stepOn(stepQuarantine, audit.DecisionActed, "gpu050")), 1)
	assert.Equal(t, audit.DecisionActed, h.console.last(t, dbe.ID).Decision, "the console's row follows")
	b, err = ctl.Breaker(ctx)
	require.NoError(t, err)
	require.Len(t, b.QuarantineCap.Waiting, 1)
	assert.Equal(t, p2.ID, b.QuarantineCap.Waiting[0].FaultID)

	// Resolved, the P2 no longer waits.
	require.NoError(t, h.consume(withState(p2, fault.StateResolved)))
	assert.Zero(t, h.waiting(fault.SeverityP2))
	b, err = ctl.Breaker(ctx)
	require.NoError(t, err)
	assert.Empty(t, b.QuarantineCap.Waiting)
}

// quarantine_cap_trips_breaker: false: counted and waiting, no trip; a
// node a human returns to service outside the exporter makes room, seen
// at the next minute's read.
func TestQuarantineCapWithoutTrip(t *testing.T) {
	h := newHarness(t, withoutCapTrip)
	h.platform.gpuNodes = 10 // a cap of one
	require.NoError(t, h.consume(faultOn(fault.TypeGPUFellOffBus, fault.SeverityP1, "n0", fault.StateOpen)))
	dbe := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "n1", fault.StateOpen)
	require.NoError(t, h.consume(dbe))
	assert.Equal(t, int64(1), h.waiting(fault.SeverityP1))
	assert.Equal(t, int64(1), h.value(mCapRefusals, "platform", "kubernetes", "severity", "P1"))
	assert.False(t, h.platform.breaker.isTripped())
	assert.Zero(t, h.value(mTrips, onKubernetes...))
	assert.Zero(t, breakerPages(h))
	assert.Empty(t, auditEntries(t, h.auditLog, func(e audit.Entry) bool { return e.Step == stepBreaker }))

	// Still full a minute later: nothing is audited again.
	before := len(readAudit(t, h.auditLog))
	h.clock.Advance(capRetryInterval)
	assert.Len(t, readAudit(t, h.auditLog), before, "a read of a full cap writes nothing")
	assert.Equal(t, int64(1), h.waiting(fault.SeverityP1))

	h.platform.setHeld("n0", false)
	h.clock.Advance(capRetryInterval)
	assert.Equal(t, []string{"n0", "n1"}, h.platform.quarantinedNodes())
	assert.Zero(t, h.waiting(fault.SeverityP1))
	assert.Len(t, auditEntries(t, h.auditLog, stepOn(stepQuarantine, audit.DecisionActed, "n1")), 1)
}

// A restart keeps what waits, from the audit file: the gauge is up at
// start, nothing trips again; once there is room, the fault (whose record
// is not here) stops waiting and acts with its next record.
func TestQuarantineCapWaitingSurvivesRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	first := newHarness(t, withAuditFile(path))
	first.platform.gpuNodes = 10
	require.NoError(t, first.consume(faultOn(fault.TypeGPUFellOffBus, fault.SeverityP1, "n0", fault.StateOpen)))
	dbe := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "n1", fault.StateOpen)
	require.NoError(t, first.consume(dbe))
	resolved := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP2, "n2", fault.StateOpen)
	require.NoError(t, first.consume(resolved, withState(resolved, fault.StateResolved)))
	require.True(t, first.platform.breaker.isTripped())
	require.NoError(t, first.exp.Shutdown(context.Background()))

	second := newHarness(t, withAuditFile(path), withConsole)
	second.platform.gpuNodes = 10
	second.platform.setHeld("n0", true)
	assert.Equal(t, int64(1), second.waiting(fault.SeverityP1), "waiting at start")
	assert.Zero(t, second.waiting(fault.SeverityP2), "the resolved fault does not wait")
	b, err := second.console.ctl(t).Breaker(context.Background())
	require.NoError(t, err)
	require.Len(t, b.QuarantineCap.Waiting, 1)
	assert.Equal(t, dbe.ID, b.QuarantineCap.Waiting[0].FaultID)

	second.clock.Advance(capRetryInterval)
	assert.False(t, second.platform.breaker.isTripped(), "an earlier life's refusal does not trip again")
	assert.Equal(t, int64(1), second.waiting(fault.SeverityP1))

	second.platform.setHeld("n0", false)
	second.clock.Advance(capRetryInterval)
	assert.Zero(t, second.waiting(fault.SeverityP1))
	assert.Empty(t, second.platform.quarantinedNodes(), "no record to act with")
	assert.Equal(t, 1, second.logs.FilterMessageSnippet("acts with its next record").Len())
	require.NoError(t, second.consume(withState(dbe, fault.StateUpdate)))
	assert.Equal(t, []string{"n1"}, second.platform.quarantinedNodes(), "its next record acts")
}

// A dry run reads no cap: the console gets none.
func TestQuarantineCapDryRun(t *testing.T) {
	h := newHarness(t, withConsole, withDryRun(true))
	b, err := h.console.ctl(t).Breaker(context.Background())
	require.NoError(t, err)
	assert.Nil(t, b.QuarantineCap)
}

// The waiting faults are bounded: past maxCapWaiting the least severe,
// most recent goes.
func TestQuarantineCapWaitingBounded(t *testing.T) {
	h := newHarness(t)
	e := h.exp
	e.mu.Lock()
	defer e.mu.Unlock()
	start := h.clock.Now()
	_, added := e.capWait("p1-old", "gpu.memory.dbe", "P1", "a", start)
	require.True(t, added)
	for i := range maxCapWaiting - 1 {
		e.capWait(fmt.Sprintf("p3-%04d", i), "straggler", "P3", "b", start.Add(time.Duration(i+1)*time.Second))
	}
	require.Len(t, e.capq.waiting, maxCapWaiting)
	e.capWait("p2-new", "nvlink.degraded", "P2", "c", start.Add(time.Hour))
	assert.Len(t, e.capq.waiting, maxCapWaiting)
	assert.Contains(t, e.capq.waiting, "p1-old")
	assert.Contains(t, e.capq.waiting, "p2-new")
	assert.NotContains(t, e.capq.waiting, fmt.Sprintf("p3-%04d", maxCapWaiting-2), "the most recent of the least severe goes")
	assert.Contains(t, e.capq.waiting, "p3-0000", "the longest wait stays")
	order := e.capOrder()
	assert.Equal(t, "p1-old", order[0].id)
	assert.Equal(t, "p2-new", order[1].id)
	assert.True(t, strings.HasPrefix(order[2].id, "p3-"))
}

func TestQuarantineCapTripsBreakerConfig(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	assert.True(t, cfg.QuarantineCapTripsBreaker, "documented default: on")
}

// stepOn matches one step with one decision on one node.
func stepOn(step, decision, node string) func(audit.Entry) bool {
	return func(e audit.Entry) bool { return e.Step == step && e.Decision == decision && e.Node == node }
}
