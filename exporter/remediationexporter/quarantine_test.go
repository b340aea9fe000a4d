package remediationexporter

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/audit"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
)

// The in-memory platform's Check and the breaker's Refund (helpers_test.go
// holds the rest of them).

func (p *memPlatform) Check(_ context.Context, req actuator.Request) (actuator.Eligibility, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.checkErr != nil {
		return actuator.Eligibility{}, p.checkErr
	}
	if skip, ok := p.skips[req.Node]; ok {
		return actuator.Eligibility{Skip: skip, Detail: "node " + req.Node + " (test)"}, nil
	}
	gpu := p.gpuNodes
	if gpu == 0 {
		gpu = 10000
	}
	return actuator.Eligibility{Ours: p.held[req.Node], GPUNodes: gpu, Quarantined: len(p.held)}, nil
}

// hold marks node quarantined (or released). Callers hold p.mu.
func (p *memPlatform) hold(node string, on bool) {
	if p.held == nil {
		p.held = map[string]bool{}
	}
	if on {
		p.held[node] = true
	} else {
		delete(p.held, node)
	}
}

func (b *memBreaker) Refund(_ context.Context, node string, admittedAt time.Time) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if at, ok := b.at[node]; ok && at.Equal(admittedAt) {
		delete(b.nodes, node)
		delete(b.at, node)
	}
	return nil
}

// admitted notes when node was admitted. Callers hold b.mu.
func (b *memBreaker) admitted(node string, now time.Time) {
	if b.at == nil {
		b.at = map[string]time.Time{}
	}
	b.at[node] = now
}

func (b *memBreaker) counted() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.nodes)
}

// Forged faults naming nodes that do not exist are skipped before the
// breaker: they spend none of its budget, and a real DBE afterwards is
// acted on.
func TestGhostNodesDoNotTripTheBreaker(t *testing.T) {
	h := newHarness(t)
	h.platform.breaker.budget = 2
	h.platform.skips = map[string]actuator.Outcome{}
	var ghosts []fault.Record
	for i := range 10 {
		name := fmt.Sprintf("ghost%02d", i)
		h.platform.skips[name] = actuator.SkipNotFound
		ghosts = append(ghosts, faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, name, fault.StateOpen))
	}
	require.NoError(t, h.consume(ghosts...))
	q, _ := h.platform.counts()
	assert.Zero(t, q, "no Quarantine call for a ghost")
	assert.Zero(t, h.platform.breaker.counted(), "no breaker slot spent")
	tripped, err := h.platform.breaker.Tripped(context.Background())
	require.NoError(t, err)
	assert.False(t, tripped)
	skipped := h.auditFor(stepQuarantine, audit.DecisionSkipped)
	require.Len(t, skipped, 10)
	for _, e := range skipped {
		assert.Equal(t, string(actuator.SkipNotFound), e.Outcome)
		assert.Contains(t, e.Reason, "skip_not_found: node ghost")
	}

	dbe := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "real01", fault.StateOpen)
	require.NoError(t, h.consume(dbe))
	q, _ = h.platform.counts()
	assert.Equal(t, 1, q, "the real DBE is acted on")
	require.Len(t, h.auditFor(stepQuarantine, audit.DecisionActed), 1)
	for _, p := range h.hook.got() {
		assert.NotEqual(t, "breaker_tripped", p.Decision.Request)
	}

	// A ghost's fault is final: its next record does not ask again.
	require.NoError(t, h.consume(withState(ghosts[0], fault.StateUpdate)))
	assert.Len(t, h.auditFor(stepQuarantine, audit.DecisionSkipped), 11)
	assert.Contains(t, h.auditFor(stepQuarantine, audit.DecisionSkipped)[10].Reason, "duplicate")
}

func TestNodeWithoutGPUIsNeverQuarantined(t *testing.T) {
	h := newHarness(t)
	h.platform.skips = map[string]actuator.Outcome{"control-plane-1": actuator.SkipNoGPU}
	require.NoError(t, h.consume(faultOn(fault.TypeGPUFellOffBus, fault.SeverityP1, "control-plane-1", fault.StateOpen)))
	q, _ := h.platform.counts()
	assert.Zero(t, q)
	assert.Zero(t, h.platform.breaker.counted())
	skipped := h.auditFor(stepQuarantine, audit.DecisionSkipped)
	require.Len(t, skipped, 1)
	assert.Equal(t, "skip_no_gpu", skipped[0].Outcome)
	// The page still says what was (not) done.
	got := h.hook.got()
	require.Len(t, got, 1)
	assert.Equal(t, audit.DecisionSkipped, got[0].Decision.Outcome)
	assert.Contains(t, got[0].Decision.Reason, "skip_no_gpu")
}

// A skip the platform's Quarantine gives after Check passed (the node
// changed in between) gives the breaker's slot back.
func TestQuarantineSkipRefundsTheBreaker(t *testing.T) {
	h := newHarness(t)
	h.platform.breaker.budget = 1
	h.platform.outcome = actuator.SkipNotFound
	require.NoError(t, h.consume(faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "gone01", fault.StateOpen)))
	assert.Zero(t, h.platform.breaker.counted(), "refunded")

	h.platform.outcome = ""
	require.NoError(t, h.consume(faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "real01", fault.StateOpen)))
	require.Len(t, h.auditFor(stepQuarantine, audit.DecisionActed), 1, "the one slot is still there")
}

// The cap on the share of GPU nodes quarantined at once holds over many
// breaker windows: the breaker admits every fault, the cap does not.
func TestQuarantinedShareCapHoldsOverWindows(t *testing.T) {
	h := newHarness(t, withoutCapTrip) // the trip: quarantinecap_test.go
	h.platform.gpuNodes = 20           // max_quarantined_fraction 0.1 (default): 2
	for i := range 20 {
		// A new breaker window per fault.
		require.NoError(t, h.platform.breaker.Reset(context.Background()))
		h.clock.Advance(2 * time.Hour)
		require.NoError(t, h.consume(faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, fmt.Sprintf("gpu%02d", i), fault.StateOpen)))
	}
	q, _ := h.platform.counts()
	assert.Equal(t, 2, q, "10 % of 20 GPU nodes")
	capped := auditEntries(t, h.auditLog, func(e audit.Entry) bool {
		return e.Step == stepQuarantine && e.Decision == audit.DecisionSkipped
	})
	require.Len(t, capped, 18)
	assert.Equal(t, "quarantine cap: 2 of 20 GPU nodes already quarantined by this exporter (max_quarantined_fraction 0.1 allows 2)", capped[0].Reason)
	assert.Empty(t, capped[0].Outcome, "not final: tried again once there is room")
	assert.Zero(t, h.platform.breaker.counted(), "a capped fault takes no breaker slot")

	// A node of ours with a second fault adds nothing: acted on.
	second := faultOn(fault.TypeNVLinkDegraded, fault.SeverityP1, "gpu00", fault.StateOpen)
	require.NoError(t, h.consume(second))
	q, _ = h.platform.counts()
	assert.Equal(t, 3, q)

	// Room again (a human released one): the next record of a capped fault acts.
	h.platform.mu.Lock()
	h.platform.hold("gpu01", false)
	h.platform.mu.Unlock()
	require.NoError(t, h.consume(withState(faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "gpu05", fault.StateOpen), fault.StateUpdate)))
	q, _ = h.platform.counts()
	assert.Equal(t, 4, q)
}

// What cannot be read is not acted on.
func TestCheckFailureFailsClosed(t *testing.T) {
	h := newHarness(t)
	h.platform.checkErr = errAPIServerDown
	err := h.consume(faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "n1", fault.StateOpen))
	require.ErrorContains(t, err, "connection refused")
	q, _ := h.platform.counts()
	assert.Zero(t, q)
	assert.Zero(t, h.platform.breaker.counted())
	failed := h.auditFor(stepQuarantine, audit.DecisionFailed)
	require.Len(t, failed, 1)
	assert.Contains(t, failed[0].Reason, "platform check failed")
	assert.Equal(t, 3, failed[0].Attempts, "max_attempts")

	// Readable again: the redelivered record acts.
	h.platform.mu.Lock()
	h.platform.checkErr = nil
	h.platform.mu.Unlock()
	require.NoError(t, h.consume(faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "n1", fault.StateOpen)))
	q, _ = h.platform.counts()
	assert.Equal(t, 1, q)
}

func TestQuarantineCap(t *testing.T) {
	for _, c := range []struct {
		fraction float64
		gpuNodes int
		want     int
	}{{0.1, 20, 2}, {0.1, 5, 1}, {0.1, 0, 1}, {0.29, 100, 29}, {1, 7, 7}, {0.5, 3, 1}} {
		assert.Equal(t, c.want, quarantineCap(c.fraction, c.gpuNodes), "%v of %d", c.fraction, c.gpuNodes)
	}
}

func TestMaxQuarantinedFractionConfig(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	assert.InDelta(t, 0.1, cfg.MaxQuarantinedFraction, 0, "documented default")
	for _, bad := range []float64{0, -0.1, 1.01} {
		cfg.MaxQuarantinedFraction = bad
		assert.ErrorContains(t, cfg.Validate(), "max_quarantined_fraction", "%v", bad)
	}
	cfg.MaxQuarantinedFraction = 1
	assert.NoError(t, cfg.Validate())
}
