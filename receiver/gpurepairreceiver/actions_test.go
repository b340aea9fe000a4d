package gpurepairreceiver

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-gpu/otelcol-gpu/extension/nodestateextension/nodestate"
	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpurepairreceiver/internal/verify"
)

func startReset(t *testing.T, e *env, id, gpu string) repair.Job {
	t.Helper()
	j, err := e.client.StartGPUReset(context.Background(), testNode, repair.GPUResetRequest{ID: id, Node: testNode, FaultID: "f-1", GPUUUID: gpu})
	require.NoError(t, err)
	return j
}

// records returns the gpu.repair.result records the receiver emitted.
func records(e *env) []plog.LogRecord {
	var out []plog.LogRecord
	for _, ld := range e.sink.AllLogs() {
		for i := 0; i < ld.ResourceLogs().Len(); i++ {
			rl := ld.ResourceLogs().At(i)
			host, _ := rl.Resource().Attributes().Get(semconv.AttrHostName)
			for j := 0; j < rl.ScopeLogs().Len(); j++ {
				lrs := rl.ScopeLogs().At(j).LogRecords()
				for k := 0; k < lrs.Len(); k++ {
					if host.Str() == testNode && lrs.At(k).EventName() == semconv.EventGPURepairResult {
						out = append(out, lrs.At(k))
					}
				}
			}
		}
	}
	return out
}

func waitRecords(t *testing.T, e *env, n int) []plog.LogRecord {
	t.Helper()
	for {
		if r := records(e); len(r) >= n {
			return r
		}
		time.Sleep(time.Millisecond)
	}
}

func TestGPUResetOfAnIdleGPU(t *testing.T) {
	e := newEnv(t)
	j := startReset(t, e, "reset-1", gpu1)
	assert.Equal(t, "reset-1", j.ID)
	assert.Equal(t, "gpu_reset", j.Kind)
	j = e.waitJob("reset-1")
	assert.Equal(t, repair.JobPassed, j.State, j.Detail)
	require.Len(t, j.Results, 1)
	assert.Equal(t, repair.CheckResult{Check: "gpu_reset", GPU: gpu1, Passed: true,
		Detail: "exit status 0; output: GPU 00000000:17:00.0 was successfully reset."}, j.Results[0])
	assert.Equal(t, []verify.GPU{{UUID: gpu1, Index: 1}}, e.devices.resets)

	recs := waitRecords(t, e, 1)
	require.Len(t, recs, 1)
	a := recs[0].Attributes().AsRaw()
	assert.Equal(t, "reset-1", a[semconv.AttrGPURepairJobID])
	assert.Equal(t, "passed", a[semconv.AttrGPURepairState])
	assert.Equal(t, "gpu_reset", a[semconv.AttrGPURepairKind])
	assert.Equal(t, "f-1", a[semconv.AttrGPURepairFaultID])
	assert.Equal(t, semconv.EventGPURepairResult, a[semconv.AttrEventName])
	var body repair.Job
	require.NoError(t, repair.DecodeStrict([]byte(recs[0].Body().Str()), &body))
	assert.Equal(t, j, body, "the record's body is the job the API answers")
}

// A busy GPU is never reset: a process on it, NVML failing, the GPU
// missing from the process list, the inventory failing, a GPU of another
// node, and a GPU that becomes busy between the job's start and the reset.
func TestBusyGPUNeverReset(t *testing.T) {
	for name, c := range map[string]struct {
		set  func(f *fakeDevices)
		gpu  string
		want string
	}{
		"a process":            {func(f *fakeDevices) { f.procs = map[string][]int{gpu0: {7, 3}, gpu1: {}} }, gpu0, "busy: 2 processes (pids 3, 7)"},
		"nvml failing":         {func(f *fakeDevices) { f.procsErr = errNVML }, gpu0, "busy: process list unavailable"},
		"no answer for it":     {func(f *fakeDevices) { f.procs = map[string][]int{gpu1: {}} }, gpu0, "busy: process list has no answer"},
		"inventory failing":    {func(f *fakeDevices) { f.invErr = errNVML }, gpu0, "GPU state unknown"},
		"not this node's":      {func(*fakeDevices) {}, "GPU-elsewhere", "not a GPU of this node"},
		"busy when re-checked": {func(f *fakeDevices) { f.procsSeq = []map[string][]int{{gpu0: {}}, {gpu0: {99}}} }, gpu0, "busy: 1 process (pid 99)"},
	} {
		t.Run(name, func(t *testing.T) {
			d := newFakeDevices()
			c.set(d)
			e := newEnv(t, withDevices(d))
			startReset(t, e, "r", c.gpu)
			j := e.waitJob("r")
			assert.Equal(t, repair.JobRefused, j.State)
			assert.Contains(t, j.Detail, c.want)
			assert.Zero(t, d.resetCount(), "the GPU was reset")
			recs := waitRecords(t, e, 1)
			assert.Equal(t, "refused", recs[0].Attributes().AsRaw()[semconv.AttrGPURepairState])
		})
	}
}

// The re-check happens immediately before the reset: a process that
// starts after the first check (the hook runs between the two) stops it.
func TestResetReChecksImmediatelyBefore(t *testing.T) {
	d := newFakeDevices()
	e := newEnv(t, withDevices(d), withOpt(func(o *factoryOptions) {
		o.beforeReset = func() { d.set(func(f *fakeDevices) { f.procs = map[string][]int{gpu0: {1234}, gpu1: {}} }) }
	}))
	startReset(t, e, "r", gpu0)
	j := e.waitJob("r")
	assert.Equal(t, repair.JobRefused, j.State)
	assert.Contains(t, j.Detail, "pid 1234")
	assert.Zero(t, d.resetCount())
}

// With the nodestate extension, SM activity counts too; no reading is busy.
func TestSMActivityMakesBusy(t *testing.T) {
	store := nodestate.NewMemoryStore(nodestate.DefaultLimits())
	now := time.Now()
	store.RecordGPU(gpu0, now.Add(-time.Second), nodestate.GPUSample{SMActive: nodestate.Gauge{Value: 0.5, Valid: true}})
	store.RecordGPU(gpu1, now.Add(-10*time.Minute), nodestate.GPUSample{SMActive: nodestate.Gauge{Value: 0, Valid: true}})
	b := &busyChecker{devices: newFakeDevices(), store: store, smIdle: DefaultSMActiveIdle, maxAge: DefaultSMActiveMaxAge, now: func() time.Time { return now }}
	_, states, err := b.check(context.Background())
	require.NoError(t, err)
	assert.Equal(t, busyState{true, "SM activity 0.500"}, states[gpu0])
	assert.True(t, states[gpu1].busy, "a reading older than sm_active_max_age is none")

	store.RecordGPU(gpu1, now.Add(-time.Second), nodestate.GPUSample{SMActive: nodestate.Gauge{Value: 0.001, Valid: true}})
	_, states, err = b.check(context.Background())
	require.NoError(t, err)
	assert.Equal(t, busyState{}, states[gpu1])

	empty := nodestate.NewMemoryStore(nodestate.DefaultLimits())
	b.store = empty
	_, states, err = b.check(context.Background())
	require.NoError(t, err)
	assert.Equal(t, busyState{true, "no SM activity reading"}, states[gpu1])
}

// The reset command's failure is reported with its exit status and output.
func TestResetCommandFailureReported(t *testing.T) {
	d := newFakeDevices()
	cmd := &commandReset{argv: []string{"sh", "-c", "echo unable to reset GPU {index} {uuid} >&2; exit 3"}, timeout: time.Minute}
	d.reset = cmd.reset
	e := newEnv(t, withDevices(d))
	startReset(t, e, "r", gpu1)
	j := e.waitJob("r")
	assert.Equal(t, repair.JobFailed, j.State)
	assert.Contains(t, j.Detail, "exited with status 3")
	require.Len(t, j.Results, 1)
	assert.False(t, j.Results[0].Passed)
	assert.Equal(t, "exit status 3; output: unable to reset GPU 1 "+gpu1, j.Results[0].Detail)
}

// A retry with the same id returns the same job; the same id for another
// request is a conflict; one job per GPU at a time.
func TestJobIdempotency(t *testing.T) {
	d := newFakeDevices()
	release := make(chan struct{})
	d.reset = func(ctx context.Context, _ verify.GPU) (ResetOutcome, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return ResetOutcome{}, nil
	}
	e := newEnv(t, withDevices(d))
	first := startReset(t, e, "r1", gpu0)
	e.waitState("r1", repair.JobRunning)
	again := startReset(t, e, "r1", gpu0)
	assert.Equal(t, first.ID, again.ID)
	assert.Equal(t, repair.JobRunning, again.State, "the retry sees the running job, not a new one")

	_, err := e.client.StartGPUReset(context.Background(), testNode, repair.GPUResetRequest{ID: "r1", Node: testNode, FaultID: "f-1", GPUUUID: gpu1})
	assert.Equal(t, http.StatusConflict, statusOf(err))

	other := startReset(t, e, "r2", gpu0)
	assert.Equal(t, repair.JobRefused, other.State)
	assert.Contains(t, other.Detail, "unfinished job r1")

	close(release)
	assert.Equal(t, repair.JobPassed, e.waitJob("r1").State)
	assert.Equal(t, 1, d.resetCount(), "the retry did not reset again")
	again = startReset(t, e, "r1", gpu0)
	assert.Equal(t, repair.JobPassed, again.State, "a retry after the end returns the finished job")
	assert.Equal(t, 1, d.resetCount())
}

// Shutdown during a running reset command: the command's process group is
// killed, the job ends failed, Shutdown returns (goleak checks nothing is
// left behind).
func TestShutdownDuringRunningCommand(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "started")
	d := newFakeDevices()
	cmd := &commandReset{argv: []string{"sh", "-c", "touch " + marker + "; sleep 600 & wait; echo {index}"}, timeout: time.Hour}
	d.reset = cmd.reset
	e := newEnv(t, withDevices(d))
	startReset(t, e, "r", gpu0)
	for {
		if _, err := os.Stat(marker); err == nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	require.NoError(t, e.rcv.Shutdown(context.Background()))
	recs := waitRecords(t, e, 1)
	require.Len(t, recs, 1)
	var j repair.Job
	require.NoError(t, repair.DecodeStrict([]byte(recs[0].Body().Str()), &j))
	assert.Equal(t, repair.JobFailed, j.State)
	assert.Contains(t, j.Detail, "stopped")
	assert.True(t, d.shutdown)
}
