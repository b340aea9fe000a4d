package gpurepairreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpurepairreceiver"

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpurepairreceiver/internal/verify"
)

// actions carries out the jobs: what a GPU reset and a verification do.
type actions struct {
	busy    *busyChecker
	devices Devices
	runners map[repair.Check]verify.Runner

	verifyTimeout time.Duration
	idleWait      time.Duration
	idlePoll      time.Duration
	// after is time.After; tests replace it.
	after func(time.Duration) <-chan time.Time
	// beforeReset runs between the last busy check and the reset; tests
	// use it to prove the re-check (nil in production).
	beforeReset func()
}

// gpuReset resets gpu when it is a GPU of this node and idle: checked when
// the job starts and again immediately before the reset. Busy or unknown:
// refused, nothing done.
func (a *actions) gpuReset(uuid string) jobRun {
	return func(ctx context.Context, t *jobTracker) (repair.JobState, string, []repair.CheckResult) {
		gpu, why, ok := a.idleGPU(ctx, uuid)
		if !ok {
			return repair.JobRefused, why, nil
		}
		t.running(fmt.Sprintf("resetting GPU %d (%s)", gpu.Index, gpu.UUID))
		if a.beforeReset != nil {
			a.beforeReset()
		}
		// The re-check: a process may have started since.
		if gpu, why, ok = a.idleGPU(ctx, uuid); !ok {
			return repair.JobRefused, why, nil
		}
		out, err := a.devices.Reset(ctx, gpu)
		res := repair.CheckResult{Check: string(repair.ActionGPUReset), GPU: gpu.UUID, Passed: err == nil,
			Detail: fmt.Sprintf("exit status %d; output: %s", out.ExitCode, strings.TrimSpace(out.Output))}
		if err != nil {
			return repair.JobFailed, fmt.Sprintf("reset of GPU %d (%s) failed: %v", gpu.Index, gpu.UUID, err), []repair.CheckResult{res}
		}
		return repair.JobPassed, fmt.Sprintf("GPU %d (%s) reset", gpu.Index, gpu.UUID), []repair.CheckResult{res}
	}
}

// idleGPU returns uuid's GPU when it is one of this node's and idle; else
// why not.
func (a *actions) idleGPU(ctx context.Context, uuid string) (verify.GPU, string, bool) {
	gpus, states, err := a.busy.check(ctx)
	if err != nil {
		return verify.GPU{}, "GPU state unknown: " + err.Error(), false
	}
	i := slices.IndexFunc(gpus, func(g verify.GPU) bool { return g.UUID == uuid })
	if i < 0 {
		return verify.GPU{}, fmt.Sprintf("GPU %s is not a GPU of this node", uuid), false
	}
	if s := states[uuid]; s.busy {
		return verify.GPU{}, fmt.Sprintf("GPU %d (%s) is busy: %s", gpus[i].Index, uuid, s.why), false
	}
	return gpus[i], "", true
}

// verify runs the requested checks once the GPUs to check are idle
// (pending until then, at most idle_wait), each through its Runner.
func (a *actions) verify(req repair.VerifyRequest) jobRun {
	return func(ctx context.Context, t *jobTracker) (repair.JobState, string, []repair.CheckResult) {
		for _, c := range req.Checks {
			if _, ok := a.runners[c.Check]; !ok {
				return repair.JobRefused, fmt.Sprintf("check %q is not available on this agent", c.Check), nil
			}
		}
		gpus, why, ok := a.waitIdle(ctx, t, req.GPUs)
		if !ok {
			return repair.JobRefused, why, nil
		}
		uuids := make([]string, len(gpus))
		for i, g := range gpus {
			uuids[i] = g.UUID
		}
		if err := t.hold(uuids); err != nil {
			return repair.JobRefused, err.Error(), nil
		}
		ctx, cancel := context.WithTimeout(ctx, a.verifyTimeout)
		defer cancel()
		var results []repair.CheckResult
		passed := true
		for _, c := range req.Checks {
			t.running(fmt.Sprintf("running %s on %d GPUs", c.Check, len(gpus)))
			got, err := a.runners[c.Check].Run(ctx, verify.Request{Spec: c, GPUs: slices.Clone(gpus)})
			if err != nil {
				results = append(results, repair.CheckResult{Check: string(c.Check), Passed: false, Detail: "could not run: " + err.Error()})
				passed = false
				if ctx.Err() != nil {
					break
				}
				continue
			}
			if len(got) == 0 {
				// A check that reports nothing proved nothing.
				results = append(results, repair.CheckResult{Check: string(c.Check), Passed: false, Detail: "the check reported no result"})
				passed = false
				continue
			}
			for _, r := range got {
				passed = passed && r.Passed
			}
			results = append(results, got...)
		}
		if !passed {
			return repair.JobFailed, "a check did not pass", results
		}
		return repair.JobPassed, fmt.Sprintf("%d checks passed on %d GPUs", len(req.Checks), len(gpus)), results
	}
}

// waitIdle waits until every GPU of want (every GPU of the node when empty)
// is idle, polling; it gives up after idle_wait or when ctx ends.
func (a *actions) waitIdle(ctx context.Context, t *jobTracker, want []string) ([]verify.GPU, string, bool) {
	var deadline <-chan time.Time
	if a.idleWait > 0 {
		deadline = a.after(a.idleWait)
	}
	for {
		gpus, why, idle := a.selectIdle(ctx, want)
		if idle {
			return gpus, "", true
		}
		if gpus == nil && why != "" && !strings.HasPrefix(why, "GPU state unknown") {
			return nil, why, false // not a GPU of this node: waiting will not help
		}
		t.pending("waiting for idle GPUs: " + why)
		if deadline == nil {
			return nil, why, false
		}
		select {
		case <-ctx.Done():
			return nil, "stopped while waiting for idle GPUs: " + why, false
		case <-deadline:
			return nil, fmt.Sprintf("GPUs not idle within %s: %s", a.idleWait, why), false
		case <-a.after(a.idlePoll):
		}
	}
}

// selectIdle returns the GPUs of want when all are idle; otherwise why not
// (with gpus nil when want names a GPU the node does not have).
func (a *actions) selectIdle(ctx context.Context, want []string) ([]verify.GPU, string, bool) {
	all, states, err := a.busy.check(ctx)
	if err != nil {
		return nil, "GPU state unknown: " + err.Error(), false
	}
	var gpus []verify.GPU
	if len(want) == 0 {
		gpus = all
	} else {
		for _, u := range want {
			i := slices.IndexFunc(all, func(g verify.GPU) bool { return g.UUID == u })
			if i < 0 {
				return nil, fmt.Sprintf("GPU %s is not a GPU of this node", u), false
			}
			gpus = append(gpus, all[i])
		}
	}
	if len(gpus) == 0 {
		return nil, "this node has no GPU to check", false
	}
	var busy []string
	for _, g := range gpus {
		if s := states[g.UUID]; s.busy {
			busy = append(busy, fmt.Sprintf("GPU %d (%s): %s", g.Index, g.UUID, s.why))
		}
	}
	if len(busy) > 0 {
		return gpus, strings.Join(busy, "; "), false
	}
	return gpus, "", true
}
