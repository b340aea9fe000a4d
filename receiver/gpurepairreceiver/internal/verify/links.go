package verify

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/extension/nodestateextension/nodestate"
	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
)

// Clock is time, injectable so tests move it instead of sleeping.
type Clock interface {
	Now() time.Time
	// AfterFunc runs f after d; the returned func stops it and reports
	// whether it stopped it before it ran.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// RealClock is the wall clock.
type RealClock struct{}

// Now implements Clock.
func (RealClock) Now() time.Time { return time.Now() }

// AfterFunc implements Clock.
func (RealClock) AfterFunc(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }

// sleep waits d on c, or until ctx ends.
func sleep(ctx context.Context, c Clock, d time.Duration) error {
	fired := make(chan struct{})
	stop := c.AfterFunc(d, func() { close(fired) })
	select {
	case <-fired:
		return nil
	case <-ctx.Done():
		stop()
		return ctx.Err()
	}
}

// The NVLink counters the check watches: every error counter of the link
// the store keeps.
var nvlinkCounters = []nodestate.GPUCounter{
	nodestate.NVLinkCRCFlitErrors, nodestate.NVLinkCRCDataErrors,
	nodestate.NVLinkReplayErrors, nodestate.NVLinkRecoveryErrors,
}

// Defaults of LinksOptions.
const (
	DefaultLinksPoll  = 5 * time.Second
	DefaultLinksGrace = 2 * time.Minute
	// MaxLinksWindow bounds spec.Window: the store keeps minutes of
	// readings, not hours.
	MaxLinksWindow = 6 * time.Hour
)

// LinksOptions configure the links_steady check.
type LinksOptions struct {
	// Grace is how long after the window's end the check waits for the
	// readings that close it (every counter needs one at or after the end:
	// readings arrive a scrape interval apart). Zero: DefaultLinksGrace.
	Grace time.Duration
	// Poll is how often it looks for them meanwhile. Zero: DefaultLinksPoll.
	Poll time.Duration
	// RequireIB fails the check when the node has no InfiniBand port
	// readings at all. Off: a node without InfiniBand is judged by its
	// NVLinks alone; every port it does have readings of must be steady.
	RequireIB bool
}

// LinksRunner is the Runner of repair.CheckLinksSteady.
type LinksRunner struct {
	store nodestate.Store
	clock Clock
	opts  LinksOptions
}

var _ Runner = (*LinksRunner)(nil)

// NewLinksRunner returns the links_steady Runner over the nodestate
// extension's store.
func NewLinksRunner(store nodestate.Store, clock Clock, opts LinksOptions) (*LinksRunner, error) {
	if store == nil {
		return nil, errors.New("links_steady: no nodestate store")
	}
	if clock == nil {
		clock = RealClock{}
	}
	if opts.Grace < 0 || opts.Poll < 0 {
		return nil, fmt.Errorf("links_steady: grace %s and poll %s must not be negative", opts.Grace, opts.Poll)
	}
	if opts.Grace == 0 {
		opts.Grace = DefaultLinksGrace
	}
	if opts.Poll == 0 {
		opts.Poll = DefaultLinksPoll
	}
	return &LinksRunner{store: store, clock: clock, opts: opts}, nil
}

// Run watches the window that starts now: it waits spec.Window, then up to
// the grace for the readings that close it, and judges the counters from
// the last reading at or before the start to the latest one. One result per
// GPU, in req.GPUs' order, then one for the node's InfiniBand ports (GPU
// empty). A counter passes only when it has a reading at or before the
// window's start and one at or after its end, it did not grow, and it was
// not reset; a GPU passes only when at least one of its NVLink counters is
// read and every one that is passes. No reading is not steady.
func (r *LinksRunner) Run(ctx context.Context, req Request) ([]repair.CheckResult, error) {
	if err := checkRequest(req, repair.CheckLinksSteady); err != nil {
		return nil, err
	}
	window := req.Spec.Window
	if window <= 0 || window > MaxLinksWindow {
		return nil, fmt.Errorf("links_steady: window %s is not in (0, %s]", window, MaxLinksWindow)
	}
	start := r.clock.Now()
	end := start.Add(window)
	if err := sleep(ctx, r.clock, window); err != nil {
		return nil, fmt.Errorf("links_steady: %w", err)
	}
	deadline := end.Add(r.opts.Grace)
	for {
		now := r.clock.Now()
		results, closed := r.judge(req.GPUs, start, end, now)
		if closed || !now.Before(deadline) {
			return results, nil
		}
		if err := sleep(ctx, r.clock, min(r.opts.Poll, deadline.Sub(now))); err != nil {
			return nil, fmt.Errorf("links_steady: waiting for the readings that close the window: %w", err)
		}
	}
}

// judge evaluates the window [start, end] with readings up to now. closed
// is false while some counter still lacks a reading at or after end, so
// waiting may change the verdict.
func (r *LinksRunner) judge(gpus []GPU, start, end, now time.Time) (results []repair.CheckResult, closed bool) {
	closed = true
	for _, g := range gpus {
		cr := repair.CheckResult{Check: string(repair.CheckLinksSteady), GPU: g.UUID}
		h, ok := r.store.GPUHealth(g.UUID, start, now)
		var problems []string
		read := 0
		if ok {
			for _, c := range nvlinkCounters {
				d := h.Counters[c]
				if !d.Valid {
					continue
				}
				read++
				if p, open := counterProblem(c.String(), d, start, end); p != "" {
					problems = append(problems, p)
					closed = closed && !open
				}
			}
		}
		switch {
		case read == 0:
			cr.Detail = fmt.Sprintf("no NVLink error counter reading for GPU %d: no reading is not steady", g.Index)
		case len(problems) > 0:
			cr.Detail = "NVLink " + joinBounded(problems)
		default:
			cr.Passed = true
			cr.Detail = fmt.Sprintf("%d NVLink error counters steady over %s", read, end.Sub(start))
		}
		results = append(results, cr)
	}
	ib := repair.CheckResult{Check: string(repair.CheckLinksSteady)}
	h, ok := r.store.NodeIBHealth(start, now)
	var problems []string
	for _, p := range h.Ports {
		for c := range nodestate.NumIBCounters {
			d := p.Counters[c]
			if !d.Valid {
				continue
			}
			if msg, open := counterProblem(p.Device+"/"+p.Port+" "+c.String(), d, start, end); msg != "" {
				problems = append(problems, msg)
				closed = closed && !open
			}
		}
	}
	switch {
	case !ok && r.opts.RequireIB:
		ib.Detail = "no InfiniBand port reading: no reading is not steady"
	case !ok:
		ib.Passed = true
		ib.Detail = "no InfiniBand port on this node (not required)"
	case len(problems) > 0:
		ib.Detail = "InfiniBand " + joinBounded(problems)
	default:
		ib.Passed = true
		ib.Detail = fmt.Sprintf("%d InfiniBand ports' error counters steady over %s", len(h.Ports), end.Sub(start))
	}
	return append(results, ib), closed
}

// counterProblem says what keeps one counter from being steady over
// [start, end] ("" when nothing does); open is true when a later reading
// may still settle it (the reading at or after end has not come yet).
func counterProblem(name string, d nodestate.CounterDelta, start, end time.Time) (problem string, open bool) {
	switch {
	case d.Partial || d.Since.After(start):
		return fmt.Sprintf("%s: no reading at or before the window's start", name), false
	case d.Delta > 0:
		return fmt.Sprintf("%s grew by %d", name, d.Delta), false
	case d.Resets > 0:
		return fmt.Sprintf("%s was reset %d times in the window", name, d.Resets), false
	case d.Until.Before(end):
		return fmt.Sprintf("%s: no reading at or after the window's end (last %s)", name, d.Until.UTC().Format(time.RFC3339)), true
	}
	return "", false
}

// joinBounded joins at most 8 problems, counting the rest.
func joinBounded(problems []string) string {
	const most = 8
	if len(problems) <= most {
		return strings.Join(problems, "; ")
	}
	return strings.Join(problems[:most], "; ") + fmt.Sprintf("; and %d more", len(problems)-most)
}
