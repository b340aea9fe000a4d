//go:build slurm

package remediationexporter

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/audit"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/slurm/slurmtest"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
)

// The repair loop against a real slurmctld: the exporter built by the
// factory, Slurm's drain, drained check, reboot and resume; the node's
// agent is the fake (its real side is the gpu_repair receiver's).

func slurmRepairConfig(t *testing.T, c *slurmtest.Cluster, url string) *Config {
	cfg := slurmActingConfig(t, c, url)
	cfg.Repair.Enabled = true
	cfg.Repair.PollInterval = 100 * time.Millisecond
	cfg.Repair.Agent.PrivateKeyFile = "unused: the agent is the test's"
	return cfg
}

// A DBE: Slurm drains the node, the loop sees it drained, the agent
// confirms the fault and resets the GPU, diagnostics level 2 pass, Slurm
// resumes the node; every step in the audit with its time.
func TestSlurmRepairLoopResetVerifyRelease(t *testing.T) {
	c := slurmtest.Start(t, 3)
	_, url := newSignedHook(t)
	cfg := slurmRepairConfig(t, c, url)
	agent := newFakeAgent("GPU-gpu-node2-5")
	withAgentClient(t, agent)
	exp := startFromFactory(t, cfg)

	dbe := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "gpu-node2", fault.StateOpen)
	consumeSlurm(t, exp, dbe)
	require.Equal(t, map[string]string{"gpu-node2": "otelcol-gpu: gpu.memory.dbe " + dbe.ID}, c.DrainReasons())
	c.WaitFor("gpu-node2 resumed by the repair loop", func() bool { return len(c.DrainReasons()) == 0 })

	assert.Equal(t, []repair.Step{repair.StepOnset, repair.StepRecorded, repair.StepQuarantined, repair.StepDrained,
		repair.StepRepairing, repair.StepRepaired, repair.StepVerifying, repair.StepVerified, repair.StepReleased},
		repairSteps(t, cfg.AuditFile))
	drained := auditEntries(t, cfg.AuditFile, func(e audit.Entry) bool { return e.LifecycleStep == string(repair.StepDrained) })
	require.NotEmpty(t, drained)
	assert.Contains(t, drained[0].Reason, "platform: drained", "Slurm said so")
	agent.mu.Lock()
	defer agent.mu.Unlock()
	require.Len(t, agent.resets, 1)
	assert.Equal(t, "GPU-gpu-node2-5", agent.resets[0].GPUUUID)
	require.Len(t, agent.verifies, 1)
	assert.Equal(t, []repair.CheckSpec{{Check: repair.CheckDiag, Level: 2}}, agent.verifies[0].Checks)
	assert.Empty(t, c.RebootRequests())
}

// Diagnostics fail after the reset: Slurm reboots the node (scontrol
// reboot, RebootProgram, the node back with a later BootTime), they fail
// again: the node stays out of service and the RMA review request carries
// the evidence bundle.
func TestSlurmRepairLoopRebootThenRMA(t *testing.T) {
	c := slurmtest.Start(t, 3)
	hook, url := newSignedHook(t)
	cfg := slurmRepairConfig(t, c, url)
	agent := newFakeAgent("GPU-gpu-node3-5")
	agent.verifyFails = map[int]bool{1: true, 2: true}
	withAgentClient(t, agent)
	exp := startFromFactory(t, cfg)

	dbe := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "gpu-node3", fault.StateOpen)
	consumeSlurm(t, exp, dbe)
	c.WaitFor("Slurm's RebootProgram ran for gpu-node3", func() bool { return len(c.RebootRequests()) > 0 })
	c.Reboot("gpu-node3")
	c.WaitFor("the RMA review request", func() bool {
		for _, d := range hook.deliveriesWith(string(repair.StepRMA)) {
			if d.payload.EvidenceBundle != nil {
				return true
			}
		}
		for _, d := range hook.deliveries() {
			if d.payload.EvidenceBundle != nil {
				return true
			}
		}
		return false
	})
	var bundles int
	for _, d := range hook.deliveries() {
		b := d.payload.EvidenceBundle
		if b == nil {
			continue
		}
		bundles++
		assert.Equal(t, "human_approval", d.payload.Decision.Request)
		assert.Equal(t, []string{dbe.ID}, b.FaultIDs)
		require.Len(t, b.Verification, 1)
		assert.False(t, b.Verification[0].Passed)
		var steps []string
		for _, s := range b.Steps {
			steps = append(steps, s.Step)
		}
		assert.Equal(t, "onset recorded quarantined drained repairing repaired verifying drained repairing repaired verifying rma",
			strings.Join(steps, " "))
	}
	assert.Equal(t, 1, bundles)
	repaired := auditEntries(t, cfg.AuditFile, func(e audit.Entry) bool {
		return e.LifecycleStep == string(repair.StepRepaired) && e.RepairAction == string(repair.ActionReboot)
	})
	require.Len(t, repaired, 1)
	assert.Contains(t, repaired[0].Reason, "platform: ", "Slurm said the reboot is done")
	assert.NotContains(t, c.NodeLine("gpu-node3"), "State=IDLE ", "not returned to service")
	assert.Len(t, c.RebootRequests(), 1)
}
