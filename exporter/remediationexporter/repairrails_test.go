package remediationexporter

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/audit"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
)

// Without a platform that reboots, a reboot goes to the maintenance
// webhook (signed; request reboot with node, fault and attempt), and the
// agent's new boot id says it is done.
func TestRepairLoopRebootThroughMaintenanceWebhook(t *testing.T) {
	agent := newFakeAgent("GPU-xl003-5")
	h := newHarness(t, withRepair(agent))
	bus := faultOn(fault.TypeGPUFellOffBus, fault.SeverityP1, "xl003", fault.StateOpen) // ladder [reboot]
	require.NoError(t, h.consume(bus))

	posted := func() bool {
		for _, p := range h.hook.got() {
			if p.Decision.Request == string(repair.ActionReboot) {
				return true
			}
		}
		return false
	}
	require.True(t, h.tickUntil(10, posted), "no maintenance request")
	var got int
	for i, p := range h.hook.got() {
		if p.Decision.Request != string(repair.ActionReboot) {
			continue
		}
		got++
		assert.Equal(t, "maintenance", p.Route)
		assert.Equal(t, "xl003", p.Decision.Node)
		assert.Equal(t, 1, p.Decision.Attempt)
		assert.Equal(t, bus.ID, p.Fault.ID)
		h.hook.mu.Lock()
		assert.Equal(t, bus.ID+"/repair/reboot/1", h.hook.deliveries[i])
		h.hook.mu.Unlock()
	}
	assert.Equal(t, 1, got)
	assert.Zero(t, h.hook.badSigs)

	h.tickUntil(3, func() bool { return false })
	assert.Equal(t, repair.StepRepairing, h.loopStep("xl003"), "no new boot id yet")
	agent.reboot()
	require.True(t, h.tickUntil(10, func() bool { _, r := h.platform.counts(); return r == 1 }), "never released")
	done := auditEntries(t, h.auditLog, func(e audit.Entry) bool { return e.LifecycleStep == string(repair.StepRepaired) })
	require.Len(t, done, 1)
	assert.Contains(t, done[0].Reason, "new boot id")
	assert.Equal(t, []repair.CheckSpec{{Check: repair.CheckDiag, Level: 1}}, agent.verifies[0].Checks, "level 1 by default")
}

// Only the replica that acts drives the loop: a standby keeps the state
// and calls nothing.
func TestRepairLoopOnlyTheLeaderDrives(t *testing.T) {
	agent := newFakeAgent("GPU-xl003-5")
	leader := &flagLeader{leader: true}
	h := newHarness(t, withRepair(agent), func(_ *Config, d *dependencies) { d.leader = leader })
	require.NoError(t, h.consume(dbeWithEvidence("xl003")))
	leader.set(false)
	h.tickUntil(20, func() bool { return false })
	assert.Zero(t, agent.count("NodeStatus")+agent.count("StartGPUReset"), "a standby calls no agent")
	assert.Equal(t, repair.StepQuarantined, h.loopStep("xl003"))

	leader.set(true)
	require.True(t, h.tickUntil(20, func() bool { _, r := h.platform.counts(); return r == 1 }), "the new leader drives it")
}

// A platform that no longer holds the node for us (a human took it over)
// makes the loop end, touching nothing, and the slot goes back.
func TestRepairLoopEndsWhenTheNodeIsNotOurs(t *testing.T) {
	agent := newFakeAgent("GPU-xl003-5")
	plat := &notOursPlatform{repairPlatform: repairPlatform{carries: []repair.Action{repair.ActionReboot}, drained: true}}
	h := newHarness(t, withRepair(agent), func(c *Config, d *dependencies) {
		c.Repair.Breaker.MaxRepairs = 1
		plat.memPlatform = d.platform.(*memPlatform)
		d.platform = plat
	})
	require.NoError(t, h.consume(faultOn(fault.TypeGPUFellOffBus, fault.SeverityP1, "xl003", fault.StateOpen)))
	require.True(t, h.tickUntil(5, func() bool { return h.loopStep("xl003") == "" }))
	skipped := auditEntries(t, h.auditLog, func(e audit.Entry) bool {
		return e.Step == stepRepair && e.Decision == audit.DecisionSkipped && e.Outcome == string(actuator.SkipForeign)
	})
	require.Len(t, skipped, 1)
	_, r := h.platform.counts()
	assert.Zero(t, r, "no release call: it is not ours")
	h.exp.mu.Lock()
	assert.Empty(t, h.exp.repairs.at, "the slot was refunded")
	_, held := h.exp.state.Holding("xl003")
	h.exp.mu.Unlock()
	assert.False(t, held)
}

type notOursPlatform struct{ repairPlatform }

func (p *notOursPlatform) StartRepair(context.Context, actuator.RepairRequest) (actuator.Result, error) {
	return actuator.Result{Outcome: actuator.SkipForeign, Detail: "cordoned by someone else"}, nil
}

// A verification that never finishes runs into its bound and climbs the
// ladder; a node in rma after a restart is not asked about again.
func TestRepairLoopVerifyTimeoutThenRestartInRMA(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	agent := newFakeAgent("GPU-xl003-5")
	agent.holdVerify = true
	first := newHarness(t, withAuditFile(path), withRepair(agent), func(c *Config, _ *dependencies) { c.Repair.StepTimeouts.Verify = 2 * time.Minute })
	require.NoError(t, first.consume(faultOn(fault.TypeGPUFellOffBus, fault.SeverityP1, "xl003", fault.StateOpen))) // [reboot]
	agent.reboot()                                                                                                  // the boot id moves on by itself below
	require.True(t, first.tickUntil(40, func() bool {
		agent.reboot()
		return first.loopStep("xl003") == repair.StepRMA
	}), "never reached rma")
	timedOut := auditEntries(t, path, func(e audit.Entry) bool {
		return e.Step == stepRepair && strings.HasPrefix(e.Reason, "verifying timed out")
	})
	require.Len(t, timedOut, 1)
	rma := func(h *harness) int {
		n := 0
		for _, p := range h.hook.got() {
			if p.EvidenceBundle != nil {
				n++
			}
		}
		return n
	}
	assert.Equal(t, 1, rma(first))
	require.NoError(t, first.exp.Shutdown(context.Background()))

	second := newHarness(t, withAuditFile(path), withRepair(agent))
	assert.Equal(t, repair.StepRMA, second.loopStep("xl003"))
	second.tickUntil(10, func() bool { return false })
	assert.Zero(t, rma(second), "the RMA request is not sent again")
	nodes, err := second.exp.controller.Quarantined(context.Background())
	require.NoError(t, err)
	require.Len(t, nodes, 1)
	assert.Contains(t, nodes[0].Reason, "RMA review")
}

// A platform that carries GPU resets (NVSentinel's GPUReset objects) gets
// the reset, the GPU still checked idle first; its "done" ends the repair.
func TestRepairLoopGPUResetThroughThePlatform(t *testing.T) {
	agent := newFakeAgent("GPU-xl003-5")
	plat := &repairPlatform{carries: []repair.Action{repair.ActionGPUReset, repair.ActionReboot}, drained: true, status: actuator.RepairDone}
	h := newHarness(t, withRepair(agent), withRepairPlatform(plat))
	dbe := dbeWithEvidence("xl003")
	require.NoError(t, h.consume(dbe))
	require.True(t, h.tickUntil(10, func() bool { _, r := h.platform.counts(); return r == 1 }), "never released")
	starts := plat.repairStarts()
	require.Len(t, starts, 1)
	assert.Equal(t, actuator.RepairRequest{Node: "xl003", GPUUUID: "GPU-xl003-5", FaultID: dbe.ID, Attempt: 1, FaultType: dbe.IDType(),
		Action: repair.ActionGPUReset, Reason: "gpu_reset for " + dbe.ID + " (attempt 1)", Requested: starts[0].Requested}, starts[0])
	assert.False(t, starts[0].Requested.IsZero())
	assert.Empty(t, agent.resets, "the agent did not reset it")
	assert.Positive(t, agent.count("NodeStatus"), "the GPU was checked idle")
	assert.Equal(t, int64(1), h.value(mStepSeconds, "step", "onset"), "detection latency observed")
}

// The node's agent must confirm the fault from its own signals before the
// first repair: one it does not confirm (signals forged about the node),
// or an agent client that cannot ask, repairs nothing; the node stays
// quarantined for a human, with no RMA request.
func TestRepairLoopUnconfirmedFaultRepairsNothing(t *testing.T) {
	for name, setup := range map[string]func(*fakeAgent) nodeAgent{
		"not confirmed":       func(a *fakeAgent) nodeAgent { a.unconfirmed = true; return a },
		"cannot be confirmed": func(a *fakeAgent) nodeAgent { return agentWithoutConfirm{a} },
	} {
		t.Run(name, func(t *testing.T) {
			agent := newFakeAgent("GPU-xl003-5")
			h := newHarness(t, withRepair(nil), func(_ *Config, d *dependencies) { d.agent = setup(agent) })
			require.NoError(t, h.consume(dbeWithEvidence("xl003")))
			require.True(t, h.tickUntil(10, func() bool { return h.loopStep("xl003") == "" }), "the loop never ended")
			h.tickUntil(10, func() bool { return false })

			assert.Zero(t, agent.count("StartGPUReset")+agent.count("StartVerify"), "nothing repaired")
			held := auditEntries(t, h.auditLog, func(e audit.Entry) bool {
				return e.Step == stepRepair && e.Decision == audit.DecisionSkipped && strings.HasPrefix(e.Reason, "no repair: ")
			})
			require.Len(t, held, 1)
			nodes, err := h.exp.controller.Quarantined(context.Background())
			require.NoError(t, err)
			require.Len(t, nodes, 1, "still quarantined")
			assert.Contains(t, nodes[0].Reason, "waits for a human")
			assert.Nil(t, nodes[0].Lifecycle)
			for _, p := range h.hook.got() {
				assert.Nil(t, p.EvidenceBundle, "no RMA request")
			}
			_, r := h.platform.counts()
			assert.Zero(t, r)
		})
	}
}
