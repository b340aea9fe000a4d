package gpurepairreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpurepairreceiver"

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
)

// Job kinds (repair.Job.Kind).
const (
	kindGPUReset = string(repair.ActionGPUReset)
	kindVerify   = "verify"
)

var (
	// errConflict: a job id reused for a different request.
	errConflict = errors.New("job id already used for a different request")
	// errTooManyJobs: max_jobs jobs held and none finished.
	errTooManyJobs = errors.New("too many unfinished jobs")
	// errStopped: the receiver is shutting down.
	errStopped = errors.New("the receiver is shutting down")
)

// jobRun is a job's work. It runs in a goroutine of its own with a context
// cancelled at Shutdown; it moves the job along through the tracker and
// returns the final state, detail and results.
type jobRun func(ctx context.Context, t *jobTracker) (repair.JobState, string, []repair.CheckResult)

// jobs holds the receiver's jobs: idempotent by id (a retry returns the
// same job), at most one unfinished job per GPU, at most max jobs kept (the
// oldest finished one forgotten first), every job's context cancelled at
// stop.
type jobs struct {
	max      int
	now      func() time.Time
	finished func(repair.Job) // called once per job when it ends, outside the lock

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	stopped bool
	byID    map[string]*heldJob
	order   []string          // ids, oldest first
	gpus    map[string]string // GPU UUID -> id of the unfinished job holding it
}

type heldJob struct {
	job  repair.Job
	key  string   // what the request asked, to tell a retry from a conflict
	gpus []string // GPUs held while unfinished
}

func newJobs(max int, now func() time.Time, finished func(repair.Job)) *jobs {
	ctx, cancel := context.WithCancel(context.Background())
	return &jobs{max: max, now: now, finished: finished, ctx: ctx, cancel: cancel,
		byID: map[string]*heldJob{}, gpus: map[string]string{}}
}

// start returns the job id names: the existing one when the same request
// was made before (created false), else a new job running run. key is the
// request's content; the same id with another key is errConflict. A job
// whose GPUs another unfinished job holds ends refused at once. gpus may
// be nil when the job's GPUs are only known once it runs (a verification
// of every GPU): it then holds them through the tracker's hold.
func (js *jobs) start(id, node, faultID, kind, key string, gpus []string, run jobRun) (repair.Job, bool, error) {
	js.mu.Lock()
	if js.stopped {
		js.mu.Unlock()
		return repair.Job{}, false, errStopped
	}
	if h, ok := js.byID[id]; ok {
		defer js.mu.Unlock()
		if h.key != key {
			return repair.Job{}, false, fmt.Errorf("%w: %s", errConflict, id)
		}
		return copyJob(h.job), false, nil
	}
	if len(js.byID) >= js.max && !js.evictOldestFinished() {
		js.mu.Unlock()
		return repair.Job{}, false, errTooManyJobs
	}
	h := &heldJob{key: key, job: repair.Job{ID: id, Node: node, FaultID: faultID, Kind: kind, State: repair.JobPending}}
	js.byID[id] = h
	js.order = append(js.order, id)
	if other := js.holderOf(gpus); other != "" {
		h.job.State, h.job.Detail = repair.JobRefused, other
		h.job.Finished = js.now().UTC()
		out := copyJob(h.job)
		js.mu.Unlock()
		js.finished(out)
		return out, true, nil
	}
	js.hold(h, gpus)
	out := copyJob(h.job)
	js.wg.Add(1)
	js.mu.Unlock()

	go func() {
		defer js.wg.Done()
		t := &jobTracker{js: js, h: h}
		state, detail, results := run(js.ctx, t)
		if js.ctx.Err() != nil && !state.Final() {
			state, detail = repair.JobFailed, "stopped: the agent shut down"
		}
		js.mu.Lock()
		h.job.State, h.job.Detail, h.job.Results = state, detail, results
		h.job.Finished = js.now().UTC()
		js.release(h)
		done := copyJob(h.job)
		js.mu.Unlock()
		js.finished(done)
	}()
	return out, true, nil
}

// holderOf names the job holding any of gpus ("" when none). Callers hold
// js.mu.
func (js *jobs) holderOf(gpus []string) string {
	for _, g := range gpus {
		if id, ok := js.gpus[g]; ok {
			return fmt.Sprintf("GPU %s has an unfinished job %s", g, id)
		}
	}
	return ""
}

func (js *jobs) hold(h *heldJob, gpus []string) {
	for _, g := range gpus {
		js.gpus[g] = h.job.ID
	}
	h.gpus = append(h.gpus, gpus...)
}

func (js *jobs) release(h *heldJob) {
	for _, g := range h.gpus {
		if js.gpus[g] == h.job.ID {
			delete(js.gpus, g)
		}
	}
	h.gpus = nil
}

// evictOldestFinished forgets the oldest finished job; false when every
// job is unfinished. Callers hold js.mu.
func (js *jobs) evictOldestFinished() bool {
	for i, id := range js.order {
		if js.byID[id].job.State.Final() {
			delete(js.byID, id)
			js.order = slices.Delete(js.order, i, i+1)
			return true
		}
	}
	return false
}

// get returns a copy of job id.
func (js *jobs) get(id string) (repair.Job, bool) {
	js.mu.Lock()
	defer js.mu.Unlock()
	h, ok := js.byID[id]
	if !ok {
		return repair.Job{}, false
	}
	return copyJob(h.job), true
}

// stop cancels every job's context and waits until their goroutines have
// ended or ctx ends.
func (js *jobs) stop(ctx context.Context) error {
	js.mu.Lock()
	js.stopped = true
	js.mu.Unlock()
	js.cancel()
	done := make(chan struct{})
	go func() {
		js.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("gpurepair: jobs still running at shutdown: %w", ctx.Err())
	}
}

// jobTracker is what a running job may change of itself.
type jobTracker struct {
	js *jobs
	h  *heldJob
}

// running marks the job running (from pending).
func (t *jobTracker) running(detail string) {
	t.js.mu.Lock()
	defer t.js.mu.Unlock()
	t.h.job.State, t.h.job.Detail = repair.JobRunning, detail
	if t.h.job.Started.IsZero() {
		t.h.job.Started = t.js.now().UTC()
	}
}

// pending sets the detail of a pending job (what it waits for).
func (t *jobTracker) pending(detail string) {
	t.js.mu.Lock()
	defer t.js.mu.Unlock()
	t.h.job.Detail = detail
}

// hold takes gpus for the job, or says which job holds one.
func (t *jobTracker) hold(gpus []string) error {
	t.js.mu.Lock()
	defer t.js.mu.Unlock()
	var mine []string
	for _, g := range gpus {
		if t.js.gpus[g] != t.h.job.ID {
			mine = append(mine, g)
		}
	}
	if other := t.js.holderOf(mine); other != "" {
		return errors.New(other)
	}
	t.js.hold(t.h, mine)
	return nil
}

func copyJob(j repair.Job) repair.Job {
	if j.Results != nil {
		r := make([]repair.CheckResult, len(j.Results))
		for i, c := range j.Results {
			c.Tests = slices.Clone(c.Tests)
			r[i] = c
		}
		j.Results = r
	}
	return j
}
