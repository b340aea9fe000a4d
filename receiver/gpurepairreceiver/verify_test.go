package gpurepairreceiver

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpurepairreceiver/internal/verify"
)

func startVerify(t *testing.T, e *env, req repair.VerifyRequest) repair.Job {
	t.Helper()
	req.Node = testNode
	j, err := e.client.StartVerify(context.Background(), testNode, req)
	require.NoError(t, err)
	return j
}

var diag1 = repair.CheckSpec{Check: repair.CheckDiag, Level: 1}

func TestVerifyPasses(t *testing.T) {
	diag := &fakeRunner{results: []repair.CheckResult{{Check: "dcgm_diag", GPU: gpu0, Passed: true}, {Check: "dcgm_diag", GPU: gpu1, Passed: true}}}
	links := &fakeRunner{results: []repair.CheckResult{{Check: "links_steady", Passed: true}}}
	e := newEnv(t, withOpt(withRunners(map[repair.Check]verify.Runner{repair.CheckDiag: diag, repair.CheckLinksSteady: links})))
	linkSpec := repair.CheckSpec{Check: repair.CheckLinksSteady, Window: 2 * time.Minute}
	startVerify(t, e, repair.VerifyRequest{ID: "v1", FaultID: "f-1", Checks: []repair.CheckSpec{diag1, linkSpec}})
	j := e.waitJob("v1")
	assert.Equal(t, repair.JobPassed, j.State, j.Detail)
	assert.Len(t, j.Results, 3)
	allGPUs := []verify.GPU{{UUID: gpu0, Index: 0}, {UUID: gpu1, Index: 1}}
	assert.Equal(t, []verify.Request{{Spec: diag1, GPUs: allGPUs}}, diag.got, "no GPUs named: every GPU of the node")
	assert.Equal(t, []verify.Request{{Spec: linkSpec, GPUs: allGPUs}}, links.got)
}

func TestVerifyFails(t *testing.T) {
	for name, r := range map[string]*fakeRunner{
		"a check failed":     {results: []repair.CheckResult{{Check: "dcgm_diag", GPU: gpu1, Passed: false, Tests: []repair.TestResult{{Name: "Memory", Result: "fail"}}}}},
		"could not run":      {err: errors.New("DCGM unavailable")},
		"reported no result": {},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, withOpt(withRunners(map[repair.Check]verify.Runner{repair.CheckDiag: r})))
			startVerify(t, e, repair.VerifyRequest{ID: "v1", GPUs: []string{gpu1}, Checks: []repair.CheckSpec{diag1}})
			j := e.waitJob("v1")
			assert.Equal(t, repair.JobFailed, j.State)
			require.NotEmpty(t, j.Results)
			assert.False(t, j.Results[0].Passed)
			assert.Equal(t, []verify.GPU{{UUID: gpu1, Index: 1}}, r.got[0].GPUs)
		})
	}
}

// A check the agent has no runner for ends refused: never a pass.
func TestVerifyCheckNotAvailable(t *testing.T) {
	e := newEnv(t)
	startVerify(t, e, repair.VerifyRequest{ID: "v1", Checks: []repair.CheckSpec{diag1}})
	j := e.waitJob("v1")
	assert.Equal(t, repair.JobRefused, j.State)
	assert.Contains(t, j.Detail, "not available")
}

// The checks run only once the GPUs are idle: pending meanwhile.
func TestVerifyWaitsForIdleGPUs(t *testing.T) {
	d := newFakeDevices()
	d.procs = map[string][]int{gpu0: {10}, gpu1: {}}
	diag := &fakeRunner{results: []repair.CheckResult{{Check: "dcgm_diag", Passed: true}}}
	e := newEnv(t, withDevices(d), withOpt(withRunners(map[repair.Check]verify.Runner{repair.CheckDiag: diag})))
	startVerify(t, e, repair.VerifyRequest{ID: "v1", Checks: []repair.CheckSpec{diag1}})
	for {
		j, err := e.client.Job(context.Background(), testNode, "v1")
		require.NoError(t, err)
		require.Equal(t, repair.JobPending, j.State)
		if j.Detail != "" {
			assert.Contains(t, j.Detail, "waiting for idle GPUs: GPU 0")
			break
		}
		time.Sleep(time.Millisecond)
	}
	diag.mu.Lock()
	assert.Empty(t, diag.got, "no check while a GPU is busy")
	diag.mu.Unlock()
	d.set(func(f *fakeDevices) { f.procs = map[string][]int{gpu0: {}, gpu1: {}} })
	assert.Equal(t, repair.JobPassed, e.waitJob("v1").State)
}

// Past idle_wait, a verification whose GPUs stay busy ends refused.
func TestVerifyIdleWaitBounded(t *testing.T) {
	d := newFakeDevices()
	d.procsErr = errNVML
	e := newEnv(t, withDevices(d), withOpt(withRunners(map[repair.Check]verify.Runner{repair.CheckDiag: &fakeRunner{}})))
	startVerify(t, e, repair.VerifyRequest{ID: "v1", Checks: []repair.CheckSpec{diag1}})
	e.waitState("v1", repair.JobPending)
	e.idleDeadline <- time.Now()
	j := e.waitJob("v1")
	assert.Equal(t, repair.JobRefused, j.State)
	assert.Contains(t, j.Detail, "not idle within 1h0m0s")
	assert.Contains(t, j.Detail, "process list unavailable")
}

func TestVerifyRequestChecked(t *testing.T) {
	e := newEnv(t, withOpt(withRunners(map[repair.Check]verify.Runner{repair.CheckDiag: &fakeRunner{}})))
	for name, req := range map[string]repair.VerifyRequest{
		"no check":      {ID: "v"},
		"level 0":       {ID: "v", Checks: []repair.CheckSpec{{Check: repair.CheckDiag}}},
		"level 4":       {ID: "v", Checks: []repair.CheckSpec{{Check: repair.CheckDiag, Level: 4}}},
		"no window":     {ID: "v", Checks: []repair.CheckSpec{{Check: repair.CheckLinksSteady}}},
		"unknown check": {ID: "v", Checks: []repair.CheckSpec{{Check: "burn_in"}}},
		"repeated GPU":  {ID: "v", GPUs: []string{gpu0, gpu0}, Checks: []repair.CheckSpec{diag1}},
	} {
		req.Node = testNode
		_, err := e.client.StartVerify(context.Background(), testNode, req)
		assert.Equal(t, http.StatusBadRequest, statusOf(err), name)
	}
	startVerify(t, e, repair.VerifyRequest{ID: "v2", GPUs: []string{"GPU-elsewhere"}, Checks: []repair.CheckSpec{diag1}})
	j := e.waitJob("v2")
	assert.Equal(t, repair.JobRefused, j.State)
	assert.Contains(t, j.Detail, "not a GPU of this node")
}

// A running verification holds its GPUs: a reset of one is refused.
func TestVerifyHoldsItsGPUs(t *testing.T) {
	diag := &fakeRunner{block: make(chan struct{}), results: []repair.CheckResult{{Check: "dcgm_diag", Passed: true}}}
	d := newFakeDevices()
	e := newEnv(t, withDevices(d), withOpt(withRunners(map[repair.Check]verify.Runner{repair.CheckDiag: diag})))
	startVerify(t, e, repair.VerifyRequest{ID: "v1", Checks: []repair.CheckSpec{diag1}})
	e.waitState("v1", repair.JobRunning)
	j := startReset(t, e, "r1", gpu1)
	assert.Equal(t, repair.JobRefused, j.State)
	assert.Contains(t, j.Detail, "unfinished job v1")
	close(diag.block)
	assert.Equal(t, repair.JobPassed, e.waitJob("v1").State)
	assert.Zero(t, d.resetCount())
}
