package verify

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
)

// DiagTimeouts bound one diagnostic run per level; zero takes the default.
type DiagTimeouts struct {
	Quick  time.Duration // level 1 (DCGM: about a minute)
	Medium time.Duration // level 2 (a few minutes)
	Long   time.Duration // level 3 (tens of minutes on an 8-GPU node)
}

// DefaultDiagTimeouts are generous multiples of DCGM's documented run
// times: a run past them is hung, not slow.
var DefaultDiagTimeouts = DiagTimeouts{Quick: 10 * time.Minute, Medium: 30 * time.Minute, Long: 2 * time.Hour}

func (t DiagTimeouts) forLevel(level int) time.Duration {
	d, def := t.Quick, DefaultDiagTimeouts.Quick
	switch level {
	case 2:
		d, def = t.Medium, DefaultDiagTimeouts.Medium
	case 3:
		d, def = t.Long, DefaultDiagTimeouts.Long
	}
	if d <= 0 {
		return def
	}
	return d
}

// Validate refuses negative timeouts, naming the level.
func (t DiagTimeouts) Validate() error {
	for _, c := range []struct {
		name string
		d    time.Duration
	}{{"quick (level 1)", t.Quick}, {"medium (level 2)", t.Medium}, {"long (level 3)", t.Long}} {
		if c.d < 0 {
			return fmt.Errorf("diagnostic timeout %s: %s is negative", c.name, c.d)
		}
	}
	return nil
}

// diagBackend runs one diagnostic: DCGM's report, and the DCGM GPU id of
// each requested GPU (ids[i] is gpus[i]'s; -1 when DCGM does not know it).
type diagBackend interface {
	run(ctx context.Context, level int, gpus []GPU) (rep *DiagReport, ids []int, err error)
}

// DiagRunner is the Runner of repair.CheckDiag. It runs one diagnostic at
// a time (DCGM runs one per host engine); a second Run waits for the first.
type DiagRunner struct {
	backend   diagBackend
	timeouts  DiagTimeouts
	opts      DiagOptions
	sem       chan struct{}
	closeWait func(ctx context.Context) error
}

var _ Runner = (*DiagRunner)(nil)

func newDiagRunner(b diagBackend, timeouts DiagTimeouts, opts DiagOptions) (*DiagRunner, error) {
	if err := timeouts.Validate(); err != nil {
		return nil, err
	}
	return &DiagRunner{backend: b, timeouts: timeouts, opts: opts, sem: make(chan struct{}, 1)}, nil
}

// errTimedOut wraps a run that outlived its level's timeout.
var errTimedOut = errors.New("the diagnostic timed out")

// Run runs the diagnostic at req.Spec.Level on req.GPUs and returns one
// result per GPU, in req.GPUs' order. A diagnostic that could not run or
// whose output could not be read returns an error; ctx ending returns
// ctx's error after the run was stopped.
func (r *DiagRunner) Run(ctx context.Context, req Request) ([]repair.CheckResult, error) {
	if err := checkRequest(req, repair.CheckDiag); err != nil {
		return nil, err
	}
	level := req.Spec.Level
	if level < 1 || level > 3 {
		return nil, fmt.Errorf("dcgm_diag: level %d is not a DCGM diagnostic level (1 quick, 2 medium, 3 long)", level)
	}
	select {
	case r.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("dcgm_diag: waiting for the diagnostic before it: %w", ctx.Err())
	}
	defer func() { <-r.sem }()

	timeout := r.timeouts.forLevel(level)
	runCtx, cancel := context.WithTimeoutCause(ctx, timeout, errTimedOut)
	defer cancel()
	rep, ids, err := r.backend.run(runCtx, level, req.GPUs)
	if ctx.Err() != nil {
		return nil, fmt.Errorf("dcgm_diag: level %d: %w", level, ctx.Err())
	}
	if errors.Is(context.Cause(runCtx), errTimedOut) {
		return nil, fmt.Errorf("dcgm_diag: level %d: no result after %s: %w", level, timeout, errTimedOut)
	}
	if err != nil {
		return nil, fmt.Errorf("dcgm_diag: level %d: %w", level, err)
	}
	return rep.Evaluate(level, req.GPUs, ids, r.opts), nil
}

// Close waits, until ctx ends, for work a cancelled Run left behind (the
// library backend cannot stop a diagnostic DCGM runs; it waits for it).
func (r *DiagRunner) Close(ctx context.Context) error {
	if r.closeWait == nil {
		return nil
	}
	return r.closeWait(ctx)
}

// checkRequest refuses a request for another check, with no GPU, or with a
// GPU twice or without a UUID.
func checkRequest(req Request, want repair.Check) error {
	if req.Spec.Check != want {
		return fmt.Errorf("%s: asked to run check %q", want, req.Spec.Check)
	}
	if len(req.GPUs) == 0 {
		return fmt.Errorf("%s: no GPU to check", want)
	}
	uuids := make(map[string]struct{}, len(req.GPUs))
	indexes := make(map[int]struct{}, len(req.GPUs))
	for i, g := range req.GPUs {
		if g.UUID == "" {
			return fmt.Errorf("%s: gpus[%d] has no UUID", want, i)
		}
		if g.Index < 0 || g.Index >= maxGPUID {
			return fmt.Errorf("%s: gpus[%d] (%s): index %d is out of range", want, i, g.UUID, g.Index)
		}
		if _, dup := uuids[g.UUID]; dup {
			return fmt.Errorf("%s: GPU %s is asked for twice", want, g.UUID)
		}
		if _, dup := indexes[g.Index]; dup {
			return fmt.Errorf("%s: GPU index %d is asked for twice", want, g.Index)
		}
		uuids[g.UUID], indexes[g.Index] = struct{}{}, struct{}{}
	}
	return nil
}
