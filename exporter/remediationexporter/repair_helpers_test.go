package remediationexporter

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/actuator"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/audit"
	"github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/lifecycle"
	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
)

// fakeAgent is a node agent behind the nodeAgent seam: it knows one node's
// GPUs, whether each is busy, its boot id, and runs jobs that finish on
// their second read. The real agent and its signing client are tested in
// internal/repair and the agent's receiver.
type fakeAgent struct {
	mu     sync.Mutex
	bootID string
	gpus   []string
	busy   map[string]string // GPU UUID: why it is busy
	// verifyFails: the verifications that fail (1 for the first); the
	// rest pass. holdVerify keeps verifications running.
	verifyFails map[int]bool
	holdVerify  bool
	// unconfirmed: Confirm says the node's signals do not show the fault.
	unconfirmed bool
	confirms    []repair.ConfirmRequest
	calls       []string // every call, "NodeStatus", "StartGPUReset", ...
	resets      []repair.GPUResetRequest
	verifies    []repair.VerifyRequest
	jobs        map[string]*fakeJob
}

type fakeJob struct {
	job   repair.Job
	reads int
	final repair.Job
}

func newFakeAgent(gpus ...string) *fakeAgent {
	return &fakeAgent{bootID: "boot-1", gpus: gpus, busy: map[string]string{}, verifyFails: map[int]bool{}, jobs: map[string]*fakeJob{}}
}

func (a *fakeAgent) NodeStatus(_ context.Context, node string) (repair.NodeStatus, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls = append(a.calls, "NodeStatus")
	st := repair.NodeStatus{Node: node, BootID: a.bootID}
	for i, g := range a.gpus {
		why, busy := a.busy[g]
		st.GPUs = append(st.GPUs, repair.GPUStatus{UUID: g, Index: i, Busy: busy, Why: why})
	}
	return st, nil
}

func (a *fakeAgent) Confirm(_ context.Context, _ string, req repair.ConfirmRequest) (repair.Confirmation, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls = append(a.calls, "Confirm")
	a.confirms = append(a.confirms, req)
	if a.unconfirmed {
		return repair.Confirmation{Detail: "no ECC error in the node's readings since the onset"}, nil
	}
	return repair.Confirmation{Confirmed: true, Detail: "seen", Evidence: []string{"ecc.dbe_volatile +1"}}, nil
}

// agentWithoutConfirm is an agent client that cannot ask for a
// confirmation.
type agentWithoutConfirm struct{ a *fakeAgent }

func (w agentWithoutConfirm) NodeStatus(ctx context.Context, node string) (repair.NodeStatus, error) {
	return w.a.NodeStatus(ctx, node)
}

func (w agentWithoutConfirm) StartGPUReset(ctx context.Context, node string, req repair.GPUResetRequest) (repair.Job, error) {
	return w.a.StartGPUReset(ctx, node, req)
}

func (w agentWithoutConfirm) StartVerify(ctx context.Context, node string, req repair.VerifyRequest) (repair.Job, error) {
	return w.a.StartVerify(ctx, node, req)
}

func (w agentWithoutConfirm) Job(ctx context.Context, node, id string) (repair.Job, error) {
	return w.a.Job(ctx, node, id)
}

func (a *fakeAgent) StartGPUReset(_ context.Context, node string, req repair.GPUResetRequest) (repair.Job, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls = append(a.calls, "StartGPUReset")
	if j := a.jobs[req.ID]; j != nil {
		return j.job, nil // idempotent by id
	}
	a.resets = append(a.resets, req)
	if why, busy := a.busy[req.GPUUUID]; busy {
		j := repair.Job{ID: req.ID, Node: node, Kind: "gpu_reset", State: repair.JobRefused, Detail: "busy: " + why}
		a.jobs[req.ID] = &fakeJob{job: j, final: j}
		return j, nil
	}
	j := repair.Job{ID: req.ID, Node: node, FaultID: req.FaultID, Kind: "gpu_reset", State: repair.JobRunning}
	final := j
	final.State, final.Detail = repair.JobPassed, "GPU reset"
	final.Results = []repair.CheckResult{{Check: "gpu_reset", GPU: req.GPUUUID, Passed: true}}
	a.jobs[req.ID] = &fakeJob{job: j, final: final}
	return j, nil
}

func (a *fakeAgent) StartVerify(_ context.Context, node string, req repair.VerifyRequest) (repair.Job, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls = append(a.calls, "StartVerify")
	if j := a.jobs[req.ID]; j != nil {
		return j.job, nil
	}
	a.verifies = append(a.verifies, req)
	n := len(a.verifies)
	j := repair.Job{ID: req.ID, Node: node, FaultID: req.FaultID, Kind: "verify", State: repair.JobRunning}
	final := j
	final.State = repair.JobPassed
	for _, c := range req.Checks {
		r := repair.CheckResult{Check: string(c.Check), Passed: true, Detail: fmt.Sprintf("level %d", c.Level)}
		if a.verifyFails[n] {
			final.State, r.Passed = repair.JobFailed, false
			r.Tests = []repair.TestResult{{Name: "Memory", Result: "fail", Info: "DBE on GPU 5"}}
		}
		final.Results = append(final.Results, r)
	}
	a.jobs[req.ID] = &fakeJob{job: j, final: final}
	return j, nil
}

func (a *fakeAgent) Job(_ context.Context, _ string, id string) (repair.Job, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls = append(a.calls, "Job")
	j := a.jobs[id]
	if j == nil {
		return repair.Job{}, fmt.Errorf("no job %s", id)
	}
	j.reads++
	if j.reads < 2 || (j.job.Kind == "verify" && a.holdVerify) {
		return j.job, nil
	}
	return j.final, nil
}

func (a *fakeAgent) reboot() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.bootID = fmt.Sprintf("boot-%d", len(a.calls))
}

func (a *fakeAgent) count(call string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, c := range a.calls {
		if c == call {
			n++
		}
	}
	return n
}

// repairPlatform is memPlatform with the Repairer seam: it carries the
// actions in carries (a reboot reboots the agent's node) and says drained
// as drained says.
type repairPlatform struct {
	*memPlatform
	agent   *fakeAgent
	carries []repair.Action
	drained bool
	// status is RepairStatus's answer ("": pending).
	status actuator.RepairState
	rmu    sync.Mutex
	starts []actuator.RepairRequest
}

func (p *repairPlatform) Repairs() []repair.Action { return p.carries }

func (p *repairPlatform) StartRepair(_ context.Context, req actuator.RepairRequest) (actuator.Result, error) {
	p.rmu.Lock()
	defer p.rmu.Unlock()
	for _, s := range p.starts {
		if s.FaultID == req.FaultID && s.Action == req.Action && s.Attempt == req.Attempt {
			return actuator.Result{Outcome: actuator.AlreadyDone}, nil
		}
	}
	p.starts = append(p.starts, req)
	if req.Action == repair.ActionReboot && p.agent != nil {
		p.agent.reboot()
	}
	return actuator.Result{Outcome: actuator.Applied, Detail: "scontrol reboot ASAP"}, nil
}

func (p *repairPlatform) RepairStatus(context.Context, actuator.RepairRequest) (actuator.RepairProgress, error) {
	if p.status != "" {
		return actuator.RepairProgress{State: p.status, Detail: "janitor says " + string(p.status)}, nil
	}
	return actuator.RepairProgress{State: actuator.RepairPending}, nil
}

func (p *repairPlatform) Drained(context.Context, string) (bool, string, error) {
	if p.drained {
		return true, "no job left", nil
	}
	return false, "job 42 runs", nil
}

func (p *repairPlatform) repairStarts() []actuator.RepairRequest {
	p.rmu.Lock()
	defer p.rmu.Unlock()
	return append([]actuator.RepairRequest(nil), p.starts...)
}

// withRepair turns the repair loop on with agent (nil: none).
func withRepair(agent *fakeAgent) harnessOpt {
	return func(c *Config, d *dependencies) {
		c.Repair.Enabled = true
		c.Repair.Agent.PrivateKeyFile = "/etc/otelcol-gpu/repair.key" // only checked to be set
		if agent != nil {
			d.agent = agent
		}
	}
}

// withRepairPlatform gives the exporter a platform that carries repairs.
func withRepairPlatform(p *repairPlatform) harnessOpt {
	return func(_ *Config, d *dependencies) {
		p.memPlatform = d.platform.(*memPlatform)
		d.platform = p
	}
}

// tickUntil advances the clock one poll interval at a time, at most n
// times, until done holds; it reports whether it did.
func (h *harness) tickUntil(n int, done func() bool) bool {
	for range n {
		if done() {
			return true
		}
		h.clock.Advance(h.exp.cfg.Repair.PollInterval)
	}
	return done()
}

// loopStep is node's step in the repair loop ("" when none).
func (h *harness) loopStep(node string) repair.Step {
	h.exp.mu.Lock()
	defer h.exp.mu.Unlock()
	l, ok := h.exp.state.RepairLoop(node)
	if !ok {
		return ""
	}
	return l.Step
}

// repairSteps are the lifecycle steps the audit's repair entries moved
// to, in order (acted or dry run).
func repairSteps(t *testing.T, path string) []repair.Step {
	t.Helper()
	var out []repair.Step
	for _, e := range readAudit(t, path) {
		if e.Step == stepRepair && (e.Decision == audit.DecisionActed || e.Decision == audit.DecisionDryRun) && e.LifecycleStep != "" {
			require.False(t, e.Time.IsZero(), "every step has its time: %+v", e)
			if e.RepairRef == rmaRequested || e.RepairRef == lifecycle.RefConfirmed {
				continue // the RMA request's and the confirmation's own entries: no step
			}
			out = append(out, repair.Step(e.LifecycleStep))
		}
	}
	return out
}
