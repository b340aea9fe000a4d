package gpurepairreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpurepairreceiver"

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/extension/nodestateextension/nodestate"
	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpurepairreceiver/internal/verify"
)

// Devices is the receiver's seam to the node's GPUs: NVML and the reset
// command in production (nvmlDevices), a fake in tests.
type Devices interface {
	// Inventory lists the node's GPUs.
	Inventory(ctx context.Context) ([]verify.GPU, error)
	// Processes returns, per GPU UUID, the pids of the processes using the
	// GPU. A GPU missing from the map could not be asked: its state is
	// unknown, which counts as busy.
	Processes(ctx context.Context) (map[string][]int, error)
	// Reset resets one GPU. It returns what it did (the command's exit
	// status and output) and an error when the reset did not succeed.
	Reset(ctx context.Context, gpu verify.GPU) (ResetOutcome, error)
	// Shutdown releases what the devices hold (NVML).
	Shutdown(ctx context.Context) error
}

// ResetOutcome is what a reset did.
type ResetOutcome struct {
	// ExitCode is the command's exit status (-1: it did not exit, e.g.
	// killed at the timeout or never started).
	ExitCode int
	// Output is the start of its output (stdout and stderr together),
	// bounded.
	Output string
}

// busyState is one GPU's state for the repair: busy, and why.
type busyState struct {
	busy bool
	why  string
}

// busyChecker decides which GPUs are busy. Unknown is busy (fail closed):
// NVML failing, a GPU missing from the process list, and with the
// nodestate extension configured, no recent SM activity reading.
type busyChecker struct {
	devices Devices
	store   nodestate.Store // nil: processes only
	smIdle  float64
	maxAge  time.Duration
	now     func() time.Time
}

// check returns the node's GPUs and, for each UUID, whether it is busy.
func (b *busyChecker) check(ctx context.Context) ([]verify.GPU, map[string]busyState, error) {
	gpus, err := b.devices.Inventory(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the GPU inventory: %w", err)
	}
	out := make(map[string]busyState, len(gpus))
	procs, perr := b.devices.Processes(ctx)
	now := b.now()
	for _, g := range gpus {
		out[g.UUID] = b.one(g, procs, perr, now)
	}
	return gpus, out, nil
}

func (b *busyChecker) one(g verify.GPU, procs map[string][]int, perr error, now time.Time) busyState {
	if perr != nil {
		return busyState{true, "process list unavailable: " + perr.Error()}
	}
	pids, ok := procs[g.UUID]
	if !ok {
		return busyState{true, "process list has no answer for the GPU"}
	}
	if len(pids) > 0 {
		return busyState{true, processesWhy(pids)}
	}
	if b.store == nil {
		return busyState{}
	}
	h, ok := b.store.GPUHealth(g.UUID, now.Add(-b.maxAge), now)
	switch {
	case !ok || !h.SMActive.Valid:
		return busyState{true, "no SM activity reading"}
	case now.Sub(h.SMActive.At) > b.maxAge:
		return busyState{true, fmt.Sprintf("no SM activity reading for %s", now.Sub(h.SMActive.At).Round(time.Second))}
	case h.SMActive.Value > b.smIdle:
		return busyState{true, fmt.Sprintf("SM activity %.3f", h.SMActive.Value)}
	}
	return busyState{}
}

// processesWhy says "1 process (pid 42)" or "3 processes (pids 1, 2, 3)",
// listing at most 8 pids.
func processesWhy(pids []int) string {
	p := append([]int(nil), pids...)
	sort.Ints(p)
	var list []string
	for i, pid := range p {
		if i == 8 {
			list = append(list, "...")
			break
		}
		list = append(list, strconv.Itoa(pid))
	}
	if len(p) == 1 {
		return "1 process (pid " + list[0] + ")"
	}
	return fmt.Sprintf("%d processes (pids %s)", len(p), strings.Join(list, ", "))
}

// nodeStatus answers GET node.
func (b *busyChecker) nodeStatus(ctx context.Context, node, bootID string) (repair.NodeStatus, error) {
	gpus, states, err := b.check(ctx)
	if err != nil {
		return repair.NodeStatus{}, err
	}
	st := repair.NodeStatus{Node: node, BootID: bootID, GPUs: make([]repair.GPUStatus, 0, len(gpus))}
	for _, g := range gpus {
		s := states[g.UUID]
		st.GPUs = append(st.GPUs, repair.GPUStatus{UUID: g.UUID, Index: g.Index, Busy: s.busy, Why: s.why})
	}
	return st, nil
}
