package gpurepairreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpurepairreceiver"

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpurepairreceiver/internal/verify"
)

// nvmlDevices is the production Devices: the inventory and the process
// lists from NVML (as the dcgm receiver lists processes for Slurm
// attribution, receiver/dcgmreceiver/internal/source/nvmlsrc), the reset
// by the configured command (NVML has no GPU reset).
//
// It fails closed where the dcgm receiver is lenient: a GPU NVML cannot
// open fails the whole inventory (a verification of "every GPU" must not
// pass without it), and a process query that does not answer leaves the
// GPU out of the process map (unknown, so busy). NVML calls are made one
// at a time, each bounded by the call timeout; after one that does not
// return, no other is made until it does.
type nvmlDevices struct {
	lib         nvml.Interface
	callTimeout time.Duration
	reset       *commandReset

	mu     sync.Mutex
	inited bool
	stuck  chan struct{} // closed when the call that timed out returns
	syms   map[string]bool
}

func newNVMLDevices(lib nvml.Interface, callTimeout time.Duration, reset *commandReset) *nvmlDevices {
	return &nvmlDevices{lib: lib, callTimeout: callTimeout, reset: reset}
}

// call runs fn (one NVML call) bounded by the call timeout and ctx. The
// values fn sets are only read when call returns nil. Callers hold d.mu.
func (d *nvmlDevices) call(ctx context.Context, fn func()) error {
	if d.stuck != nil {
		select {
		case <-d.stuck:
			d.stuck = nil
		default:
			return errors.New("gpurepair: nvml: an earlier call has not returned")
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	t := time.NewTimer(d.callTimeout)
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-t.C:
		d.stuck = done
		return fmt.Errorf("gpurepair: nvml: call did not return within %s", d.callTimeout)
	case <-ctx.Done():
		d.stuck = done
		return ctx.Err()
	}
}

// ret calls fn and turns its NVML return into an error.
func (d *nvmlDevices) ret(ctx context.Context, what string, fn func() nvml.Return) error {
	var r nvml.Return
	if err := d.call(ctx, func() { r = fn() }); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if r != nvml.SUCCESS {
		return fmt.Errorf("gpurepair: nvml: %s: %s", what, r.Error())
	}
	return nil
}

// init initialises NVML once (again after a failure). Callers hold d.mu.
func (d *nvmlDevices) init(ctx context.Context) error {
	if d.inited {
		return nil
	}
	if err := d.ret(ctx, "init", d.lib.Init); err != nil {
		return err
	}
	d.inited, d.syms = true, map[string]bool{}
	return nil
}

// has reports whether the loaded library has the C function name: go-nvml
// binds lazily, and calling a function the driver lacks aborts the
// process. Callers hold d.mu.
func (d *nvmlDevices) has(name string) bool {
	ext := d.lib.Extensions()
	if ext == nil {
		return true
	}
	found, seen := d.syms[name]
	if !seen {
		found = ext.LookupSymbol(name) == nil
		d.syms[name] = found
	}
	return found
}

// hasAny: any version of the function.
func (d *nvmlDevices) hasAny(name string) bool {
	return d.has(name+"_v3") || d.has(name+"_v2") || d.has(name)
}

type nvmlGPU struct {
	gpu    verify.GPU
	handle nvml.Device
}

// enumerate lists the GPUs with their handles. Callers hold d.mu.
func (d *nvmlDevices) enumerate(ctx context.Context) ([]nvmlGPU, error) {
	if err := d.init(ctx); err != nil {
		return nil, err
	}
	var n int
	if err := d.ret(ctx, "counting GPUs", func() (r nvml.Return) { n, r = d.lib.DeviceGetCount(); return }); err != nil {
		return nil, err
	}
	out := make([]nvmlGPU, 0, n)
	for i := range n {
		var g nvmlGPU
		g.gpu.Index = i
		if err := d.ret(ctx, fmt.Sprintf("opening GPU %d", i), func() (r nvml.Return) { g.handle, r = d.lib.DeviceGetHandleByIndex(i); return }); err != nil {
			return nil, err
		}
		if err := d.ret(ctx, fmt.Sprintf("reading GPU %d's UUID", i), func() (r nvml.Return) { g.gpu.UUID, r = g.handle.GetUUID(); return }); err != nil {
			return nil, err
		}
		if g.gpu.UUID == "" {
			return nil, fmt.Errorf("gpurepair: nvml: GPU %d has an empty UUID", i)
		}
		out = append(out, g)
	}
	return out, nil
}

// Inventory implements Devices.
func (d *nvmlDevices) Inventory(ctx context.Context) ([]verify.GPU, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	gpus, err := d.enumerate(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]verify.GPU, len(gpus))
	for i, g := range gpus {
		out[i] = g.gpu
	}
	return out, nil
}

// Processes implements Devices: the compute and graphics processes of each
// GPU and, with MIG enabled, of each of its MIG devices.
func (d *nvmlDevices) Processes(ctx context.Context) (map[string][]int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	gpus, err := d.enumerate(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string][]int, len(gpus))
	for _, g := range gpus {
		pids, err := d.gpuProcesses(ctx, g.handle)
		if err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			continue // unknown: left out, so busy
		}
		out[g.gpu.UUID] = pids
	}
	return out, nil
}

func (d *nvmlDevices) gpuProcesses(ctx context.Context, h nvml.Device) ([]int, error) {
	pids, err := d.handleProcesses(ctx, h)
	if err != nil {
		return nil, err
	}
	if !d.has("nvmlDeviceGetMigMode") {
		return pids, nil
	}
	var current int
	var r nvml.Return
	if err := d.call(ctx, func() { current, _, r = h.GetMigMode() }); err != nil {
		return nil, err
	}
	switch {
	case r == nvml.ERROR_NOT_SUPPORTED:
		return pids, nil // no MIG on this GPU
	case r != nvml.SUCCESS:
		return nil, fmt.Errorf("gpurepair: nvml: MIG mode: %s", r.Error())
	case current != nvml.DEVICE_MIG_ENABLE:
		return pids, nil
	}
	var count int
	if err := d.ret(ctx, "MIG device count", func() (r nvml.Return) { count, r = h.GetMaxMigDeviceCount(); return }); err != nil {
		return nil, err
	}
	for i := range count {
		var mig nvml.Device
		if err := d.call(ctx, func() { mig, r = h.GetMigDeviceHandleByIndex(i) }); err != nil {
			return nil, err
		}
		if r == nvml.ERROR_NOT_FOUND || r == nvml.ERROR_INVALID_ARGUMENT {
			continue // no MIG device in that slot
		}
		if r != nvml.SUCCESS {
			return nil, fmt.Errorf("gpurepair: nvml: MIG device %d: %s", i, r.Error())
		}
		more, err := d.handleProcesses(ctx, mig)
		if err != nil {
			return nil, err
		}
		pids = append(pids, more...)
	}
	slices.Sort(pids)
	return slices.Compact(pids), nil
}

// handleProcesses asks one handle for its compute processes (which must
// answer) and graphics processes (which may be unsupported).
func (d *nvmlDevices) handleProcesses(ctx context.Context, h nvml.Device) ([]int, error) {
	if !d.hasAny("nvmlDeviceGetComputeRunningProcesses") {
		return nil, errors.New("gpurepair: nvml: the driver has no compute process query")
	}
	var infos []nvml.ProcessInfo
	if err := d.ret(ctx, "compute processes", func() (r nvml.Return) { infos, r = h.GetComputeRunningProcesses(); return }); err != nil {
		return nil, err
	}
	pids := make([]int, 0, len(infos))
	for _, p := range infos {
		if p.Pid != 0 {
			pids = append(pids, int(p.Pid))
		}
	}
	if d.hasAny("nvmlDeviceGetGraphicsRunningProcesses") {
		var r nvml.Return
		if err := d.call(ctx, func() { infos, r = h.GetGraphicsRunningProcesses() }); err != nil {
			return nil, err
		}
		switch r {
		case nvml.SUCCESS:
			for _, p := range infos {
				if p.Pid != 0 {
					pids = append(pids, int(p.Pid))
				}
			}
		case nvml.ERROR_NOT_SUPPORTED:
		default:
			return nil, fmt.Errorf("gpurepair: nvml: graphics processes: %s", r.Error())
		}
	}
	slices.Sort(pids)
	return slices.Compact(pids), nil
}

// Reset implements Devices with the configured command.
func (d *nvmlDevices) Reset(ctx context.Context, gpu verify.GPU) (ResetOutcome, error) {
	return d.reset.reset(ctx, gpu)
}

// Shutdown implements Devices.
func (d *nvmlDevices) Shutdown(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.inited {
		return nil
	}
	d.inited = false
	return d.ret(ctx, "shutdown", d.lib.Shutdown)
}
