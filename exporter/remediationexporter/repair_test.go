package remediationexporter

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/audit"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/policy"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

const (
	mStepSeconds = "otelcol_remediation_lifecycle_step_seconds"
	mRecovery    = "otelcol_remediation_time_to_recovery_seconds"
	mLoopNodes   = "otelcol_remediation_lifecycle_nodes"
	mRepairs     = "otelcol_remediation_repairs"
	mTimeouts    = "otelcol_remediation_lifecycle_step_timeouts"
)

// dbeWithEvidence is a P1 DBE on node's GPU 5 with the readings the
// correlator attaches as evidence.
func dbeWithEvidence(node string) fault.Record {
	r := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, node, fault.StateOpen)
	r.Evidence = []fault.Evidence{
		{Signal: semconv.MetricGPUECCErrors, Value: 1, Time: r.FirstSeen},
		{Signal: semconv.MetricGPUECCErrors, Value: 3, Time: r.LastSeen},
		{Signal: semconv.MetricGPUXIDLast, Value: 48, Time: r.FirstSeen},
	}
	return r
}

// A DBE: quarantine, drained (the agent says the GPU is idle), GPU reset
// through the agent, DCGM diagnostics level 2 pass, release; every step
// in the audit with its time, and timed in the telemetry.
func TestRepairLoopResetVerifyRelease(t *testing.T) {
	agent := newFakeAgent("GPU-xl003-5", "GPU-xl003-6")
	h := newHarness(t, withRepair(agent), withConsole)
	dbe := dbeWithEvidence("xl003")
	require.NoError(t, h.consume(dbe))
	q, _ := h.platform.counts()
	require.Equal(t, 1, q)
	assert.Equal(t, repair.StepQuarantined, h.loopStep("xl003"))

	require.True(t, h.tickUntil(20, func() bool { _, r := h.platform.counts(); return r == 1 }), "never released")
	assert.Empty(t, h.loopStep("xl003"), "the loop ended with the release")

	require.Len(t, agent.confirms, 1, "the node confirmed the fault before the first repair")
	assert.Equal(t, repair.ConfirmRequest{ID: dbe.ID + "-confirm", Node: "xl003", FaultID: dbe.ID, FaultType: "gpu.memory.dbe", GPUUUID: "GPU-xl003-5",
		XID: 48, Since: dbe.FirstSeen}, agent.confirms[0])
	require.Len(t, agent.resets, 1)
	assert.Equal(t, repair.GPUResetRequest{ID: dbe.ID + "-gpu_reset-1", Node: "xl003", FaultID: dbe.ID, GPUUUID: "GPU-xl003-5"}, agent.resets[0])
	require.Len(t, agent.verifies, 1)
	assert.Equal(t, []repair.CheckSpec{{Check: repair.CheckDiag, Level: 2}}, agent.verifies[0].Checks, "level 2 for a memory fault")

	assert.Equal(t, []repair.Step{repair.StepOnset, repair.StepRecorded, repair.StepQuarantined, repair.StepDrained,
		repair.StepRepairing, repair.StepRepaired, repair.StepVerifying, repair.StepVerified, repair.StepReleased},
		repairSteps(t, h.auditLog))
	onset := auditEntries(t, h.auditLog, func(e audit.Entry) bool { return e.LifecycleStep == string(repair.StepOnset) })
	require.Len(t, onset, 1)
	assert.True(t, onset[0].Time.Equal(dbe.FirstSeen), "onset is the fault's first signal")
	verified := auditEntries(t, h.auditLog, func(e audit.Entry) bool { return e.LifecycleStep == string(repair.StepVerified) })
	require.Len(t, verified, 1)
	require.Len(t, verified[0].Verification, 1, "the verification's result is a record on the fault")
	assert.True(t, verified[0].Verification[0].Passed)
	assert.Equal(t, dbe.ID, verified[0].FaultID)
	// And on the fault in the console.
	h.console.mu.Lock()
	shown := h.console.faults[len(h.console.faults)-1]
	h.console.mu.Unlock()
	assert.Equal(t, dbe.ID, shown.ID)
	assert.Contains(t, shown.Reason, "verification passed: dcgm_diag passed")
	released := h.auditFor(stepRelease, audit.DecisionActed)
	require.Len(t, released, 1)
	assert.Contains(t, released[0].Reason, "uncordoned")

	assert.Equal(t, int64(1), h.value(mRecovery))
	assert.Equal(t, int64(1), h.value(mStepSeconds, "step", "verifying"))
	assert.Equal(t, int64(1), h.value(mRepairs, "action", "gpu_reset", "outcome", "acted"))
	assert.Equal(t, int64(1), h.value(mRepairs, "action", "gpu_reset", "outcome", "done"))
	assert.Equal(t, int64(1), h.value(mRepairs, "action", "verify", "outcome", "passed"))
	assert.Equal(t, int64(0), h.value(mLoopNodes, "step", "verifying"))

	// The cooldown after the release holds as for any release.
	require.NoError(t, h.consume(faultOn(fault.TypeGPUUnresponsive, fault.SeverityP1, "xl003", fault.StateOpen)))
	q, _ = h.platform.counts()
	assert.Equal(t, 1, q, "cooldown: not quarantined again at once")
}

// Diagnostics fail after the GPU reset: a reboot (the platform carries it;
// a new boot id says it is done), diagnostics fail again: the node waits
// for a human, and the RMA review request carries the evidence bundle.
func TestRepairLoopEscalatesToRMAWithEvidence(t *testing.T) {
	agent := newFakeAgent("GPU-xl003-5")
	agent.verifyFails = map[int]bool{1: true, 2: true}
	plat := &repairPlatform{agent: agent, carries: []repair.Action{repair.ActionReboot}, drained: true}
	h := newHarness(t, withRepair(agent), withRepairPlatform(plat))
	dbe := dbeWithEvidence("xl003")
	require.NoError(t, h.consume(dbe))

	rmaPosted := func() bool {
		for _, p := range h.hook.got() {
			if p.EvidenceBundle != nil {
				return true
			}
		}
		return false
	}
	require.True(t, h.tickUntil(30, rmaPosted), "no RMA review request")
	assert.Equal(t, repair.StepRMA, h.loopStep("xl003"))

	require.Len(t, agent.resets, 1, "the GPU reset first")
	starts := plat.repairStarts()
	require.Len(t, starts, 1, "then one reboot")
	assert.Equal(t, repair.ActionReboot, starts[0].Action)
	assert.Equal(t, 2, starts[0].Attempt)
	assert.Equal(t, dbe.ID, starts[0].FaultID)
	require.Len(t, agent.verifies, 2)

	var rma []string
	for _, p := range h.hook.got() {
		if p.EvidenceBundle == nil {
			continue
		}
		rma = append(rma, p.Decision.Request)
		assert.Equal(t, "page", p.Route)
		assert.Equal(t, string(policy.RequestHumanApproval), p.Decision.Request)
		assert.Equal(t, "xl003", p.Decision.Node)
		b := p.EvidenceBundle
		assert.Equal(t, "xl003", b.Node)
		assert.Equal(t, []string{dbe.ID}, b.FaultIDs)
		require.Len(t, b.Faults, 1)
		assert.Equal(t, dbe.ID, b.Faults[0].ID)
		assert.Len(t, b.Faults[0].Evidence, 3, "the record as it came, every evidence item")
		// The last reading per signal, newest first.
		require.Len(t, b.Readings, 2)
		assert.Equal(t, semconv.MetricGPUECCErrors, b.Readings[0].Signal)
		assert.EqualValues(t, 3, b.Readings[0].Value)
		require.NotEmpty(t, b.XIDHistory)
		assert.Equal(t, 48, b.XIDHistory[0].XID)
		require.Len(t, b.Verification, 1, "the last verification's results")
		assert.False(t, b.Verification[0].Passed)
		assert.Equal(t, "Memory", b.Verification[0].Tests[0].Name)
		require.Len(t, b.Verifications, 2, "every verification of the loop")
		for _, v := range b.Verifications {
			assert.False(t, v.Passed)
			assert.NotEmpty(t, v.At)
			require.NotEmpty(t, v.Results)
		}
		var steps []string
		for _, s := range b.Steps {
			steps = append(steps, s.Step)
			assert.NotEmpty(t, s.At)
		}
		assert.Equal(t, []string{"onset", "recorded", "quarantined", "drained", "repairing", "repaired", "verifying",
			"drained", "repairing", "repaired", "verifying", "rma"}, steps)
	}
	assert.Equal(t, []string{"human_approval"}, rma, "one RMA request")

	// Nothing releases it: not its faults' resolution, not more ticks.
	require.NoError(t, h.consume(withState(dbe, fault.StateResolved)))
	h.clock.Advance(2 * time.Hour)
	_, r := h.platform.counts()
	assert.Zero(t, r)
	nodes, err := h.exp.controller.Quarantined(context.Background())
	require.NoError(t, err)
	require.Len(t, nodes, 1)
	require.NotNil(t, nodes[0].Lifecycle, "the console shows the loop")
	lc := nodes[0].Lifecycle
	assert.Equal(t, string(repair.StepRMA), lc.Step)
	assert.Equal(t, string(repair.ActionRMA), lc.Repair)
	assert.Equal(t, 2, lc.Attempt)
	require.Len(t, lc.Verifications, 2, "both verifications, oldest first")
	assert.False(t, lc.Verifications[0].Passed)
	assert.Equal(t, "dcgm_diag level 2", lc.Verifications[1].Checks)
	assert.Contains(t, lc.Verifications[1].Detail, "dcgm_diag failed")
	assert.Equal(t, "onset", lc.History[0].Step)
	assert.Equal(t, "rma", lc.History[len(lc.History)-1].Step)
	assert.Contains(t, nodes[0].Reason, "RMA review")
	failed := auditEntries(t, h.auditLog, func(e audit.Entry) bool {
		return e.Step == stepRepair && e.Decision == audit.DecisionFailed && len(e.Verification) > 0
	})
	assert.Len(t, failed, 2, "each failed verification is a record on the fault")
	assert.Equal(t, int64(1), h.value(mLoopNodes, "step", "rma"))
}

// A GPU that is busy is never reset: the loop waits, and past the drain
// bound climbs to the next repair; never a reset call.
func TestRepairLoopNeverResetsABusyGPU(t *testing.T) {
	agent := newFakeAgent("GPU-xl003-5")
	agent.busy["GPU-xl003-5"] = "2 processes"
	h := newHarness(t, withRepair(agent), func(c *Config, _ *dependencies) { c.Repair.StepTimeouts.Drain = 5 * time.Minute })
	require.NoError(t, h.consume(dbeWithEvidence("xl003")))

	h.tickUntil(20, func() bool { return false }) // 200s: within the bound
	assert.Equal(t, repair.StepQuarantined, h.loopStep("xl003"), "waits for the GPU")
	require.True(t, h.tickUntil(30, func() bool {
		l, _ := h.exp.state.RepairLoop("xl003")
		return l.Action == repair.ActionReboot
	}), "the drain bound never escalated")
	timedOut := auditEntries(t, h.auditLog, func(e audit.Entry) bool {
		return e.Step == stepRepair && strings.Contains(e.Reason, "timed out") && strings.Contains(e.Reason, "2 processes")
	})
	require.NotEmpty(t, timedOut)
	assert.Equal(t, "reboot", timedOut[0].RepairAction)
	assert.Equal(t, int64(1), h.value(mTimeouts, "step", "quarantined"))

	// A reboot needs every GPU idle too: it waits into rma.
	require.True(t, h.tickUntil(60, func() bool { return h.loopStep("xl003") == repair.StepRMA }))
	assert.Zero(t, agent.count("StartGPUReset"), "never a reset call")
	assert.Empty(t, agent.resets)
}

// A dry run performs no repair and calls no agent: it audits what it would
// do, and the loop moves as if done, so the dry run shows the whole path.
func TestRepairLoopDryRun(t *testing.T) {
	agent := newFakeAgent("GPU-xl003-5")
	h := newHarness(t, withRepair(agent), withDryRun(true))
	dbe := dbeWithEvidence("xl003")
	require.NoError(t, h.consume(dbe))
	h.tickUntil(3, func() bool { return false })

	agent.mu.Lock()
	assert.Empty(t, agent.calls, "no agent call in a dry run")
	agent.mu.Unlock()
	q, r := h.platform.counts()
	assert.Zero(t, q+r, "no platform call")
	assert.Equal(t, []repair.Step{repair.StepOnset, repair.StepRecorded, repair.StepQuarantined, repair.StepDrained,
		repair.StepRepairing, repair.StepRepaired, repair.StepVerifying, repair.StepVerified, repair.StepReleased},
		repairSteps(t, h.auditLog))
	would := auditEntries(t, h.auditLog, func(e audit.Entry) bool {
		return e.Step == stepRepair && e.Decision == audit.DecisionDryRun && strings.HasPrefix(e.Reason, "would ")
	})
	require.Len(t, would, 2)
	assert.Equal(t, "would reset GPU GPU-xl003-5 on xl003 through its agent (attempt 1, fault "+dbe.ID+"), once its agent confirmed the fault", would[0].Reason)
	assert.Equal(t, "would verify xl003: dcgm_diag level 2", would[1].Reason)
	rel := h.auditFor(stepRelease, audit.DecisionDryRun)
	require.Len(t, rel, 1)
	assert.Contains(t, rel[0].Reason, "would call Release")
	assert.Equal(t, int64(1), h.value(mRepairs, "action", "gpu_reset", "outcome", "dry_run"))
}

// A dry run's RMA: every repair would fail only with an agent; without one
// the dry run still shows the request it would post, bundle included.
func TestRepairLoopDryRunRMAAuditsBundle(t *testing.T) {
	h := newHarness(t, withRepair(nil), withDryRun(true))
	require.NoError(t, h.consume(dbeWithEvidence("xl003")))
	h.exp.mu.Lock()
	l, ok := h.exp.state.RepairLoop("xl003")
	require.True(t, ok)
	h.exp.escalate(context.Background(), l, "test: the reset failed")
	l, _ = h.exp.state.RepairLoop("xl003")
	h.exp.escalate(context.Background(), l, "test: the reboot failed")
	h.exp.mu.Unlock()
	assert.Equal(t, repair.StepRMA, h.loopStep("xl003"))
	would := h.auditFor(stepWebhook, audit.DecisionDryRun)
	var found bool
	for _, e := range would {
		found = found || strings.Contains(e.Reason, `"evidence_bundle":{"node":"xl003"`)
	}
	assert.True(t, found, "the dry run audits the RMA request with its bundle")
	assert.Empty(t, h.hook.got(), "and posts nothing")
}

// A restart mid-loop resumes it from the audit: the verification in
// flight is read again (its job id is the same), nothing is repaired
// twice, and the node is not held for a human as other restored nodes are.
func TestRepairLoopResumesAfterRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	agent := newFakeAgent("GPU-xl003-5")
	agent.holdVerify = true
	first := newHarness(t, withAuditFile(path), withRepair(agent))
	require.NoError(t, first.consume(dbeWithEvidence("xl003")))
	require.True(t, first.tickUntil(20, func() bool { return first.loopStep("xl003") == repair.StepVerifying }))
	require.NoError(t, first.exp.Shutdown(context.Background()))

	agent.mu.Lock()
	agent.holdVerify = false
	agent.mu.Unlock()
	second := newHarness(t, withAuditFile(path), withRepair(agent))
	assert.Equal(t, repair.StepVerifying, second.loopStep("xl003"), "resumed where it was")
	require.True(t, second.tickUntil(10, func() bool { _, r := second.platform.counts(); return r == 1 }), "never released")
	assert.Len(t, agent.resets, 1, "the GPU was reset once")
	assert.Len(t, agent.verifies, 1, "the verification was not started again")
	steps := repairSteps(t, path)
	assert.Equal(t, repair.StepReleased, steps[len(steps)-1])
	assert.Equal(t, int64(1), second.value(mRecovery), "onset restored: the time to recovery is known")
}

// Without the loop (repair.enabled false, the default), a DBE is held for
// a human as before and nothing is repaired.
func TestRepairLoopOffByDefault(t *testing.T) {
	agent := newFakeAgent("GPU-xl003-5")
	h := newHarness(t, func(_ *Config, d *dependencies) { d.agent = agent })
	require.NoError(t, h.consume(dbeWithEvidence("xl003")))
	h.clock.Advance(time.Hour)
	assert.Empty(t, h.loopStep("xl003"))
	assert.Empty(t, agent.calls)
	assert.Empty(t, auditEntries(t, h.auditLog, func(e audit.Entry) bool { return e.Step == stepRepair }))
}

// The repair breaker: past max_repairs in the window a repair waits, and
// a repair the agent refused gives its slot back.
func TestRepairBudget(t *testing.T) {
	at := time.Date(2025, 3, 14, 9, 0, 0, 0, time.UTC)
	b := &repairBudget{max: 2, window: time.Hour}
	assert.True(t, b.admit(at))
	assert.True(t, b.admit(at.Add(time.Minute)))
	assert.False(t, b.admit(at.Add(2*time.Minute)), "full")
	b.refund(at.Add(time.Minute))
	assert.True(t, b.admit(at.Add(3*time.Minute)), "the refunded slot")
	assert.False(t, b.admit(at.Add(4*time.Minute)))
	assert.True(t, b.admit(at.Add(time.Hour+time.Second)), "the first left the window")
}

func TestRepairBreakerHoldsTheLoop(t *testing.T) {
	agent := newFakeAgent("GPU-a-5", "GPU-b-5")
	agent.gpus = []string{"GPU-a-5", "GPU-b-5"}
	h := newHarness(t, withRepair(agent), func(c *Config, _ *dependencies) { c.Repair.Breaker.MaxRepairs = 1 })
	require.NoError(t, h.consume(dbeWithEvidence("a"), dbeWithEvidence("b")))
	h.tickUntil(5, func() bool { return false })
	assert.Len(t, agent.resets, 1, "one repair in the window")
	refused := auditEntries(t, h.auditLog, func(e audit.Entry) bool {
		return e.Step == stepRepair && e.Decision == audit.DecisionSkipped && strings.HasPrefix(e.Reason, "repair breaker")
	})
	require.Len(t, refused, 1, "audited once, not every tick")
	assert.Equal(t, "b", refused[0].Node)
	assert.Positive(t, h.value(mRepairs, "action", "gpu_reset", "outcome", "refused"))
}
