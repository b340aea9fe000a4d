package nvmlsrc // import "github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/source/nvmlsrc"

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/source"
)

var _ source.Processes = (*Source)(nil)

// Processes lists, per GPU UUID, the pids of the processes with a compute
// or graphics context on the GPU, sorted and without duplicates. All GPUs
// are asked at once, each call through the guard with the call timeout.
//
//   - A GPU whose call hangs (or is still stuck from an earlier call) is left
//     out, and the others are still reported.
//   - A query the GPU does not support (ERROR_NOT_SUPPORTED, or a driver
//     without the function) counts as "no processes": an empty list.
//   - A query that fails otherwise (NO_PERMISSION, GPU_IS_LOST, ...) adds
//     nothing; a GPU none of whose queries answered is left out.
//   - MIG: processes on MIG instances belong to the parent GPU's UUID. NVML
//     answers on the parent handle for all instances only with enough
//     privileges, so each MIG device handle is asked as well and the
//     answers are merged.
//   - A GPU without a UUID (its identity calls hung at Start) is left out:
//     there is nothing to key it by.
//
// It fails only before a successful Start (or after Shutdown) and when ctx
// ends.
func (s *Source) Processes(ctx context.Context) (map[string][]int, error) {
	s.mu.Lock()
	started, devices, syms := s.started, s.devices, s.syms
	s.mu.Unlock()
	if !started {
		return nil, errors.New("dcgmreceiver: nvml: processes: source not started")
	}

	type answer struct {
		pids []int
		ok   bool
	}
	answers := make([]answer, len(devices))
	var wg sync.WaitGroup
	for i, d := range devices {
		if d.gpu.UUID == "" {
			continue
		}
		wg.Go(func() {
			pids, ok := s.deviceProcesses(ctx, d, syms)
			answers[i] = answer{pids, ok}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("dcgmreceiver: nvml: processes: %w", err)
	}

	out := make(map[string][]int, len(devices))
	for i, d := range devices {
		if answers[i].ok {
			out[d.gpu.UUID] = answers[i].pids
		}
	}
	return out, nil
}

// deviceProcesses asks one GPU and its MIG devices for their compute and
// graphics processes. ok is false when no query answered or one hung.
func (s *Source) deviceProcesses(ctx context.Context, d *device, syms *symbols) (pids []int, ok bool) {
	c := &caller{ctx: ctx, guard: s.guard, key: d.key, timeout: s.callTimeout, logger: s.logger, syms: syms}
	handles := []nvml.Device{d.handle}
	for _, mig := range d.migs {
		handles = append(handles, mig.handle)
	}
	pids = []int{}
	answered := false
	for _, h := range handles {
		for _, q := range [...]struct {
			what string
			fn   func() ([]nvml.ProcessInfo, nvml.Return)
		}{
			{"GetComputeRunningProcesses", h.GetComputeRunningProcesses},
			{"GetGraphicsRunningProcesses", h.GetGraphicsRunningProcesses},
		} {
			found, ok := processQuery(c, q.what, q.fn)
			answered = answered || ok
			pids = append(pids, found...)
		}
	}
	if c.failed != nil {
		s.logger.Debug("GPU did not answer the process query in time; left out",
			zap.Int("gpu", d.gpu.Index), zap.String("uuid", d.gpu.UUID), zap.Error(c.failed))
		return nil, false
	}
	return sortedUnique(pids), answered
}

// processQuery runs one process query. what is the go-nvml Device method,
// which binds the newest C version the driver has (_v3, else _v2, else the
// unversioned v1): the query counts as there if any of them is. ok is true
// when the GPU answered, including "not supported" (no pids).
func processQuery(c *caller, what string, fn func() ([]nvml.ProcessInfo, nvml.Return)) (pids []int, ok bool) {
	versioned := ""
	for _, version := range [...]string{"_v3", "_v2", ""} {
		if c.syms.has("nvmlDevice" + what + version) {
			versioned = what + version
			break
		}
	}
	if versioned == "" {
		return nil, true // an old driver without the function: not supported
	}
	// The NVML return goes back inside the value so that "not supported"
	// (an empty list) can be told from other errors (no answer).
	type result struct {
		infos []nvml.ProcessInfo
		ret   nvml.Return
	}
	res, called := call(c, versioned, func() (result, nvml.Return) {
		infos, ret := fn()
		return result{infos, ret}, nvml.SUCCESS
	})
	if !called {
		return nil, false // hung: c.failed says so
	}
	switch res.ret {
	case nvml.SUCCESS:
	case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_NOT_FOUND, nvml.ERROR_FUNCTION_NOT_FOUND:
		return nil, true
	default:
		c.logger.Debug("NVML call failed", zap.String("gpu", c.key), zap.String("call", versioned), zap.Error(res.ret))
		return nil, false
	}
	pids = make([]int, 0, len(res.infos))
	for _, p := range res.infos {
		if p.Pid != 0 { // never a real process; NVML leaves unused entries zero
			pids = append(pids, int(p.Pid))
		}
	}
	return pids, true
}

// sortedUnique sorts pids and drops repeats (one process often has a
// compute and a graphics context, or runs on several MIG instances).
func sortedUnique(pids []int) []int {
	slices.Sort(pids)
	return slices.Compact(pids)
}
