package verify

import (
	"context"
	"errors"
	"fmt"
)

// DCGMLib is every DCGM call the library backend makes. The production
// implementation (NewDCGMLib, dcgm_lib.go) calls go-dcgm; tests use a fake.
// The backend calls GPUs and RunDiag only between a successful Init and
// its cleanup: go-dcgm kills the process (an undefined symbol) when called
// without a successful Init.
type DCGMLib interface {
	// Init connects to DCGM (go-dcgm counts references: while the dcgm
	// receiver of the same process holds a connection, this shares it).
	Init() (cleanup func(), err error)
	// GPUs lists the GPUs DCGM supports, with their UUIDs.
	GPUs() ([]DCGMDevice, error)
	// RunDiag runs the diagnostic at level on the GPUs (DCGM ids) and
	// blocks until DCGM returns; it cannot be interrupted.
	RunDiag(level int, gpuIDs []uint) ([]DCGMDiagResult, error)
}

// DCGMDevice is one GPU as DCGM lists it.
type DCGMDevice struct {
	ID   uint
	UUID string
}

// DCGMDiagResult is one test's result on one GPU, as go-dcgm reports it.
type DCGMDiagResult struct {
	Test string
	// Status is go-dcgm's word: pass, skipped, warn, fail, notrun.
	Status   string
	EntityID uint
	Message  string // DCGM's error message, when the test did not pass
}

// LibraryDiagOptions configure the library backend.
type LibraryDiagOptions struct {
	Timeouts DiagTimeouts
	DiagOptions
}

// NewLibraryDiag returns the DiagRunner that runs the diagnostic through
// the DCGM library. DCGM cannot stop a diagnostic it runs this way: a Run
// whose ctx ends returns at once, the diagnostic goes on in DCGM, and the
// next Run waits for it (or fails when its own ctx ends first); Close
// waits for it.
func NewLibraryDiag(lib DCGMLib, opts LibraryDiagOptions) (*DiagRunner, error) {
	if lib == nil {
		return nil, errors.New("dcgm_diag: no DCGM library")
	}
	b := &libraryBackend{lib: lib, idle: make(chan struct{}, 1)}
	b.idle <- struct{}{}
	r, err := newDiagRunner(b, opts.Timeouts, opts.DiagOptions)
	if err != nil {
		return nil, err
	}
	r.closeWait = b.wait
	return r, nil
}

type libraryBackend struct {
	lib DCGMLib
	// idle holds a token while no diagnostic runs in DCGM; the goroutine
	// that runs one takes it and gives it back when DCGM returns.
	idle chan struct{}
}

type libOutcome struct {
	rep *DiagReport
	ids []int
	err error
}

func (b *libraryBackend) run(ctx context.Context, level int, gpus []GPU) (*DiagReport, []int, error) {
	select {
	case <-b.idle:
	case <-ctx.Done():
		return nil, nil, fmt.Errorf("a diagnostic an earlier, cancelled run left in DCGM is still running: %w", context.Cause(ctx))
	}
	out := make(chan libOutcome, 1)
	go func() {
		defer func() { b.idle <- struct{}{} }()
		rep, ids, err := b.runLocked(level, gpus)
		out <- libOutcome{rep, ids, err}
	}()
	select {
	case o := <-out:
		return o.rep, o.ids, o.err
	case <-ctx.Done():
		return nil, nil, fmt.Errorf("DCGM's diagnostic cannot be stopped; it goes on and is awaited by the next run: %w", context.Cause(ctx))
	}
}

// runLocked makes the DCGM calls of one run; only it calls b.lib.
func (b *libraryBackend) runLocked(level int, gpus []GPU) (*DiagReport, []int, error) {
	cleanup, err := b.lib.Init()
	if err != nil {
		return nil, nil, fmt.Errorf("connecting to DCGM: %w", err)
	}
	if cleanup == nil {
		return nil, nil, errors.New("connecting to DCGM: no cleanup returned")
	}
	defer cleanup()
	devices, err := b.lib.GPUs()
	if err != nil {
		return nil, nil, fmt.Errorf("listing DCGM's GPUs: %w", err)
	}
	byUUID := make(map[string]uint, len(devices))
	for _, d := range devices {
		byUUID[d.UUID] = d.ID
	}
	ids := make([]int, len(gpus))
	var run []uint
	for i, g := range gpus {
		id, ok := byUUID[g.UUID]
		if !ok || id >= maxGPUID {
			ids[i] = -1 // Evaluate fails it: DCGM does not know it
			continue
		}
		ids[i] = int(id)
		run = append(run, id)
	}
	if len(run) == 0 {
		return &DiagReport{}, ids, nil
	}
	results, err := b.lib.RunDiag(level, run)
	if err != nil {
		return nil, nil, fmt.Errorf("running the diagnostic: %w", err)
	}
	rep, err := libReport(results)
	if err != nil {
		return nil, nil, err
	}
	return rep, ids, nil
}

// libReport groups go-dcgm's results by test. A result DCGM did not run is
// left out, as dcgmi leaves it out of its JSON; an unknown status is an
// error, never a pass.
func libReport(results []DCGMDiagResult) (*DiagReport, error) {
	rep := &DiagReport{}
	index := map[string]int{}
	for i, res := range results {
		s, ok := parseDiagStatus(res.Status)
		if !ok {
			return nil, fmt.Errorf("results[%d] (test %q, GPU %d): unknown status %q: an unknown result is not a pass", i, truncateUTF8(res.Test, 64), res.EntityID, truncateUTF8(res.Status, 64))
		}
		if s == DiagNotRun {
			continue
		}
		if res.EntityID >= maxGPUID {
			return nil, fmt.Errorf("results[%d] (test %q): entity %d is not a GPU id", i, truncateUTF8(res.Test, 64), res.EntityID)
		}
		name := res.Test
		if name == "" {
			name = "unnamed test"
		}
		ti, ok := index[name]
		if !ok {
			ti = len(rep.Tests)
			index[name] = ti
			rep.Tests = append(rep.Tests, DiagTest{Name: truncateUTF8(name, 128)})
		}
		er := DiagEntityResult{GPU: true, EntityGroup: "GPU", EntityID: int(res.EntityID), Status: s}
		if res.Message != "" {
			er.Messages = []string{truncateUTF8(res.Message, maxMessageBytes)}
		}
		rep.Tests[ti].Results = append(rep.Tests[ti].Results, er)
	}
	return rep, nil
}

// wait blocks until no diagnostic runs in DCGM or ctx ends.
func (b *libraryBackend) wait(ctx context.Context) error {
	select {
	case <-b.idle:
		b.idle <- struct{}{}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("dcgm_diag: a diagnostic still runs in DCGM: %w", ctx.Err())
	}
}
