//go:build slurm

package remediationexporter

import (
	"crypto/ed25519"
	"crypto/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumertest"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/audit"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/slurm/slurmtest"
	"github.com/otelcol-gpu/otelcol-gpu/extension/nodestateextension/nodestate"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fault"
	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpurepairreceiver/gpurepairtest"
)

// Fault-injection scenarios of the repair loop with the real pieces: the
// exporter built by its factory against a real slurmctld (scontrol), the
// node's real gpu_repair receiver on loopback reached by the gateway's
// signing client, confirm over a nodestate store holding the DBE counter
// readings the dcgm receiver would record, the command diag runner running
// a fake dcgmi that prints real DCGM samples. Only the GPUs are fake.

// scenarioNode is one node's agent and what it sees.
type scenarioNode struct {
	agent   *gpurepairtest.Agent
	devices *gpurepairtest.Devices
	dcgmi   *gpurepairtest.DCGMI
	store   *nodestate.MemoryStore
	logs    *consumertest.LogsSink
	faulty  string // the DBE's GPU
}

// startScenarioAgent starts node's agent (two idle GPUs, the fault's at
// index 1) printing sample, and makes the exporter's agent client the
// real signing client reaching it.
func startScenarioAgent(t *testing.T, node, sample string) *scenarioNode {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	n := &scenarioNode{faulty: "GPU-" + node + "-5", store: nodestate.NewMemoryStore(nodestate.DefaultLimits()),
		logs: new(consumertest.LogsSink), dcgmi: gpurepairtest.FakeDCGMI(t, gpurepairtest.Sample(t, sample))}
	n.devices = gpurepairtest.NewDevices(gpurepairtest.GPU{UUID: "GPU-" + node + "-0", Index: 0}, gpurepairtest.GPU{UUID: n.faulty, Index: 1})
	n.agent = gpurepairtest.Start(t, gpurepairtest.Options{Node: node, PublicKey: pub, Devices: n.devices, Store: n.store,
		DiagCommand: n.dcgmi.Command, Logs: n.logs})
	signer, err := repair.NewSigner(priv)
	require.NoError(t, err)
	// The node's name reaches the agent's loopback address.
	c, err := repair.NewClient(repair.ClientConfig{URLTemplate: "http://{node}:8790", HTTPClient: n.agent.HTTPClient()}, signer)
	require.NoError(t, err)
	withAgentClient(t, c)
	return n
}

// recordDBE records what the node's dcgm receiver would: the volatile DBE
// counter of the faulty GPU growing, and XID 48.
func (n *scenarioNode) recordDBE() {
	now := time.Now()
	var s nodestate.GPUSample
	s.Counters[nodestate.ECCDBEVolatile] = nodestate.Counter{Value: 0, Valid: true}
	n.store.RecordGPU(n.faulty, now.Add(-time.Minute), s)
	s.Counters[nodestate.ECCDBEVolatile] = nodestate.Counter{Value: 1, Valid: true}
	n.store.RecordGPU(n.faulty, now, s)
	n.store.RecordXID(n.faulty, now, 48)
}

// recordQuiet records steady counters: nothing happened on the node.
func (n *scenarioNode) recordQuiet() {
	now := time.Now()
	var s nodestate.GPUSample
	s.Counters[nodestate.ECCDBEVolatile] = nodestate.Counter{Value: 0, Valid: true}
	n.store.RecordGPU(n.faulty, now.Add(-time.Minute), s)
	n.store.RecordGPU(n.faulty, now, s)
}

// results are the agent's gpu.repair.result records: kind, state.
func (n *scenarioNode) results() []string {
	var out []string
	for _, ld := range n.logs.AllLogs() {
		for i := 0; i < ld.ResourceLogs().Len(); i++ {
			sls := ld.ResourceLogs().At(i).ScopeLogs()
			for j := 0; j < sls.Len(); j++ {
				lrs := sls.At(j).LogRecords()
				for k := 0; k < lrs.Len(); k++ {
					lr := lrs.At(k)
					if lr.EventName() != semconv.EventGPURepairResult {
						continue
					}
					kind, _ := lr.Attributes().Get(semconv.AttrGPURepairKind)
					state, _ := lr.Attributes().Get(semconv.AttrGPURepairState)
					out = append(out, kind.Str()+" "+state.Str())
				}
			}
		}
	}
	return out
}

// repairTimeline returns the audit's lifecycle steps and asserts their
// times never go back.
func repairTimeline(t *testing.T, path string) []repair.Step {
	t.Helper()
	var last time.Time
	for _, e := range readAudit(t, path) {
		if e.Step != stepRepair || e.LifecycleStep == "" {
			continue
		}
		assert.False(t, e.Time.Before(last), "audit times go back at %s: %s < %s", e.LifecycleStep, e.Time, last)
		last = e.Time
	}
	return repairSteps(t, path)
}

func scenarioConfig(t *testing.T, c *slurmtest.Cluster, url string) *Config {
	cfg := slurmActingConfig(t, c, url)
	cfg.Repair.Enabled = true
	cfg.Repair.PollInterval = 100 * time.Millisecond
	cfg.Repair.Agent.Endpoint = "https://{node}:8790"
	cfg.Repair.Agent.PrivateKeyFile = "unused: the test builds the signing client"
	return cfg
}

// A DBE → quarantine → drain → GPU reset → diagnostics level 2 pass →
// release, every step in the audit with its time, the node's Slurm state
// after each phase.
func TestSlurmScenarioDBEResetVerifyRelease(t *testing.T) {
	c := slurmtest.Start(t, 3)
	_, url := newSignedHook(t)
	n := startScenarioAgent(t, "gpu-node2", "dcgm3_r2_pass_virtualclient.json")
	n.recordDBE()
	n.devices.SetProcesses(n.faulty, 4242) // the job is still on the GPU
	cfg := scenarioConfig(t, c, url)
	exp := startFromFactory(t, cfg)

	dbe := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "gpu-node2", fault.StateOpen)
	consumeSlurm(t, exp, dbe)
	reason := "otelcol-gpu: gpu.memory.dbe " + dbe.ID
	require.Equal(t, map[string]string{"gpu-node2": reason}, c.DrainReasons(), "drained with our reason")
	assert.Contains(t, c.NodeLine("gpu-node2"), "DRAIN")
	c.WaitFor("the loop waiting at the reset", func() bool { return slices.Contains(repairSteps(t, cfg.AuditFile), repair.StepDrained) })
	time.Sleep(5 * cfg.Repair.PollInterval)
	assert.Empty(t, n.devices.Resets(), "no reset while a process is on the GPU")
	assert.NotContains(t, repairSteps(t, cfg.AuditFile), repair.StepRepairing)
	n.devices.SetProcesses(n.faulty) // the job ended
	c.WaitFor("gpu-node2 resumed by the repair loop", func() bool { return len(c.DrainReasons()) == 0 })
	line := c.NodeLine("gpu-node2")
	assert.NotContains(t, line, "DRAIN", "resumed at release")
	assert.Regexp(t, `State=IDLE[ +]`, line, "back in service (slurmd's registration may lag: +NOT_RESPONDING)")

	assert.Equal(t, []repair.Step{repair.StepOnset, repair.StepRecorded, repair.StepQuarantined, repair.StepDrained,
		repair.StepRepairing, repair.StepRepaired, repair.StepVerifying, repair.StepVerified, repair.StepReleased},
		repairTimeline(t, cfg.AuditFile))
	confirmed := auditEntries(t, cfg.AuditFile, func(e audit.Entry) bool { return strings.HasPrefix(e.Reason, "confirmed by the node's agent") })
	require.Len(t, confirmed, 1)
	assert.Contains(t, confirmed[0].Reason, "ecc", "the agent's evidence: its own DBE counter")

	resets := n.devices.Resets()
	require.Len(t, resets, 1, "the GPU reset exactly once")
	assert.Equal(t, n.faulty, resets[0].GPU.UUID)
	assert.True(t, resets[0].Idle, "reset only when idle")
	assert.Equal(t, []string{"diag -r 2 -j -i 0,1"}, n.dcgmi.Runs(t), "the policy's level for a DBE")
	assert.Empty(t, c.RebootRequests())
	verified := auditEntries(t, cfg.AuditFile, func(e audit.Entry) bool { return e.LifecycleStep == string(repair.StepVerified) })
	require.Len(t, verified, 1)
	require.NotEmpty(t, verified[0].Verification)
	for _, r := range verified[0].Verification {
		assert.True(t, r.Passed, r.Detail)
	}
	c.WaitFor("the agent's result records", func() bool { return len(n.results()) == 2 })
	assert.Equal(t, []string{"gpu_reset passed", "verify passed"}, n.results())
}

// Diagnostics fail after the reset → Slurm reboots the node (scontrol
// reboot nextstate=DOWN, RebootProgram; the agent sees a new boot id) →
// they fail again → the node stays drained and the RMA review request
// carries the evidence bundle.
func TestSlurmScenarioDBERebootRMA(t *testing.T) {
	c := slurmtest.Start(t, 3)
	hook, url := newSignedHook(t)
	n := startScenarioAgent(t, "gpu-node3", "dcgm4_r2_memory_fail.json")
	n.recordDBE()
	cfg := scenarioConfig(t, c, url)
	exp := startFromFactory(t, cfg)

	dbe := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "gpu-node3", fault.StateOpen)
	consumeSlurm(t, exp, dbe)
	reason := "otelcol-gpu: gpu.memory.dbe " + dbe.ID
	require.Equal(t, map[string]string{"gpu-node3": reason}, c.DrainReasons())
	c.WaitFor("Slurm's RebootProgram ran for gpu-node3", func() bool { return len(c.RebootRequests()) > 0 })
	assert.Contains(t, c.NodeLine("gpu-node3"), "REBOOT", "scontrol reboot asked")
	n.agent.Reboot(t)
	c.Reboot("gpu-node3")

	var rma delivery
	c.WaitFor("the RMA review request", func() bool {
		for _, d := range hook.deliveries() {
			if d.payload.EvidenceBundle != nil {
				rma = d
				return true
			}
		}
		return false
	})
	b := rma.payload.EvidenceBundle
	assert.Equal(t, "human_approval", rma.payload.Decision.Request)
	assert.Equal(t, "gpu-node3", b.Node)
	assert.Equal(t, []string{dbe.ID}, b.FaultIDs)
	require.Len(t, b.Faults, 1, "the fault record")
	require.NotEmpty(t, b.XIDHistory)
	assert.Equal(t, 48, b.XIDHistory[0].XID)
	require.Len(t, b.Verification, 2, "the last verification, both GPUs")
	assert.True(t, b.Verification[0].Passed, "GPU index 0 passed in the sample")
	assert.Equal(t, n.faulty, b.Verification[1].GPU)
	assert.False(t, b.Verification[1].Passed)
	assert.Equal(t, []string{"memory"}, failingTests(b.Verification), "the real sample's failing test")
	require.Len(t, b.Verifications, 2, "both verifications: after the GPU reset and after the reboot")
	for i, v := range b.Verifications {
		assert.False(t, v.Passed, "verification %d", i)
		assert.NotEmpty(t, v.At, "verification %d with its time", i)
		assert.Equal(t, []string{"memory"}, failingTests(v.Results), "verification %d", i)
	}
	assert.Less(t, b.Verifications[0].At, b.Verifications[1].At, "oldest first")
	var steps []string
	for _, s := range b.Steps {
		steps = append(steps, s.Step)
		assert.NotEmpty(t, s.At, "every step with its time")
	}
	assert.Equal(t, "onset recorded quarantined drained repairing repaired verifying drained repairing repaired verifying rma", strings.Join(steps, " "))

	assert.Equal(t, []repair.Step{repair.StepOnset, repair.StepRecorded, repair.StepQuarantined, repair.StepDrained,
		repair.StepRepairing, repair.StepRepaired, repair.StepVerifying, repair.StepDrained, repair.StepRepairing,
		repair.StepRepaired, repair.StepVerifying, repair.StepRMA}, repairTimeline(t, cfg.AuditFile))
	// Both verifications failed on the real sample's memory test.
	var failedVerifications int
	for _, e := range readAudit(t, cfg.AuditFile) {
		if e.Step == stepRepair && len(e.Verification) > 0 {
			failedVerifications++
			assert.Equal(t, []string{"memory"}, failingTests(e.Verification))
		}
	}
	assert.Equal(t, 2, failedVerifications, "both verification results in the audit")

	rebooted := auditEntries(t, cfg.AuditFile, func(e audit.Entry) bool {
		return e.LifecycleStep == string(repair.StepRepaired) && e.RepairAction == string(repair.ActionReboot)
	})
	require.Len(t, rebooted, 1)
	assert.Regexp(t, `^(platform: |agent: new boot id )`, rebooted[0].Reason, "Slurm or the agent's boot id said the reboot is done")

	resets := n.devices.Resets()
	require.Len(t, resets, 1, "one GPU reset, then the reboot")
	assert.True(t, resets[0].Idle)
	assert.Equal(t, []string{"diag -r 2 -j -i 0,1", "diag -r 2 -j -i 0,1"}, n.dcgmi.Runs(t))
	assert.Len(t, c.RebootRequests(), 1)
	// Rebooted with nextstate=DOWN: back from the reboot the node is DOWN
	// with our reboot's reason, and the loop never resumed it.
	line := c.NodeLine("gpu-node3")
	assert.Contains(t, line, "State=DOWN ", "out of service in rma")
	assert.Contains(t, line, "Reason=otelcol-gpu: reboot ")
	assert.True(t, strings.HasPrefix(c.DrainReasons()["gpu-node3"], "otelcol-gpu: "), c.DrainReasons())
	c.WaitFor("the agent's result records", func() bool { return len(n.results()) == 3 })
	assert.Equal(t, []string{"gpu_reset passed", "verify failed", "verify failed"}, n.results())
}

// failingTests are the names of the failed tests of the failed results.
func failingTests(results []repair.CheckResult) []string {
	seen := map[string]bool{}
	var out []string
	for _, r := range results {
		if r.Passed {
			continue
		}
		for _, tr := range r.Tests {
			name := strings.ToLower(tr.Name)
			if tr.Result == "fail" && !seen[name] {
				seen[name] = true
				out = append(out, name)
			}
		}
	}
	return out
}

// A forged DBE: the fault record says DBE, the node's own readings are
// quiet. The agent does not confirm: no reset, no reboot, the node stays
// drained for a human and the audit says why.
func TestSlurmScenarioForgedDBENotConfirmed(t *testing.T) {
	c := slurmtest.Start(t, 3)
	_, url := newSignedHook(t)
	n := startScenarioAgent(t, "gpu-node1", "dcgm3_r2_pass_virtualclient.json")
	n.recordQuiet()
	cfg := scenarioConfig(t, c, url)
	exp := startFromFactory(t, cfg)

	dbe := faultOn(fault.TypeGPUMemoryDBE, fault.SeverityP1, "gpu-node1", fault.StateOpen)
	consumeSlurm(t, exp, dbe)
	var held []audit.Entry
	c.WaitFor("the unconfirmed hold in the audit", func() bool {
		held = auditEntries(t, cfg.AuditFile, func(e audit.Entry) bool { return strings.HasPrefix(e.Reason, "no repair: ") })
		return len(held) > 0
	})
	assert.Contains(t, held[0].Reason, "the node's own signals do not show the fault")
	assert.Contains(t, held[0].Reason, "none of this node's own readings")
	time.Sleep(5 * cfg.Repair.PollInterval)
	assert.Empty(t, n.devices.Resets(), "no reset")
	assert.Empty(t, n.dcgmi.Runs(t), "no diagnostic")
	assert.Empty(t, c.RebootRequests(), "no reboot")
	assert.Empty(t, n.results(), "the agent started no job")
	assert.Equal(t, "otelcol-gpu: gpu.memory.dbe "+dbe.ID, c.DrainReasons()["gpu-node1"], "drained, for a human")
}
