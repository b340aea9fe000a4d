package verify

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeDCGM is a DCGMLib that records its calls and fails the test when a
// call other than Init comes without a live Init, as go-dcgm would kill
// the process.
type fakeDCGM struct {
	t       *testing.T
	initErr error
	devices []DCGMDevice
	results []DCGMDiagResult
	runErr  error
	// block, when set, holds RunDiag until closed; entered is signalled
	// when RunDiag starts.
	block   chan struct{}
	entered chan struct{}

	mu       sync.Mutex
	live     bool
	calls    []string
	cleanups int
	level    int
	ran      []uint
}

func (f *fakeDCGM) record(call string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
	if call != "Init" && !f.live {
		f.t.Errorf("%s called without a successful Init: go-dcgm would kill the process", call)
	}
}

func (f *fakeDCGM) Init() (func(), error) {
	f.record("Init")
	if f.initErr != nil {
		return nil, f.initErr
	}
	f.mu.Lock()
	f.live = true
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.live = false
		f.cleanups++
	}, nil
}

func (f *fakeDCGM) GPUs() ([]DCGMDevice, error) {
	f.record("GPUs")
	return f.devices, nil
}

func (f *fakeDCGM) RunDiag(level int, ids []uint) ([]DCGMDiagResult, error) {
	f.record("RunDiag")
	f.mu.Lock()
	f.level, f.ran = level, append([]uint(nil), ids...)
	f.mu.Unlock()
	if f.entered != nil {
		f.entered <- struct{}{}
	}
	if f.block != nil {
		<-f.block
	}
	return f.results, f.runErr
}

func (f *fakeDCGM) snapshot() (calls []string, cleanups int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...), f.cleanups
}

var fakeDevices = []DCGMDevice{{ID: 0, UUID: "GPU-a"}, {ID: 1, UUID: "GPU-b"}, {ID: 2, UUID: "GPU-c"}}

func libRunner(t *testing.T, f *fakeDCGM, opts LibraryDiagOptions) *DiagRunner {
	t.Helper()
	r, err := NewLibraryDiag(f, opts)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, r.Close(context.Background())) })
	return r
}

func TestLibraryDiagPassFail(t *testing.T) {
	f := &fakeDCGM{t: t, devices: fakeDevices, results: []DCGMDiagResult{
		{Test: "software", Status: "pass", EntityID: 1},
		{Test: "software", Status: "pass", EntityID: 2},
		{Test: "memory", Status: "pass", EntityID: 1},
		{Test: "memory", Status: "fail", EntityID: 2, Message: "DBE detected"},
		{Test: "pcie", Status: "notrun", EntityID: 1},
		{Test: "eud", Status: "skipped", EntityID: 1},
	}}
	r := libRunner(t, f, LibraryDiagOptions{})
	res, err := r.Run(t.Context(), diagRequest(2, GPU{UUID: "GPU-b", Index: 5}, GPU{UUID: "GPU-c", Index: 6}))
	require.NoError(t, err)
	assert.True(t, res[0].Passed, res[0].Detail)
	assert.Equal(t, "GPU-b", res[0].GPU)
	assert.False(t, res[1].Passed)
	assert.Equal(t, "memory", res[1].Tests[0].Name)
	assert.Equal(t, "DBE detected", res[1].Tests[0].Info)
	calls, cleanups := f.snapshot()
	assert.Equal(t, []string{"Init", "GPUs", "RunDiag"}, calls)
	assert.Equal(t, 1, cleanups)
	assert.Equal(t, 2, f.level)
	assert.Equal(t, []uint{1, 2}, f.ran, "GPUs are matched by UUID, not by the driver index")
}

func TestLibraryDiagInitFails(t *testing.T) {
	f := &fakeDCGM{t: t, initErr: errors.New("libdcgm.so.4: cannot open shared object file")}
	_, err := libRunner(t, f, LibraryDiagOptions{}).Run(t.Context(), diagRequest(1, twoGPUs...))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "connecting to DCGM: libdcgm.so.4")
	calls, cleanups := f.snapshot()
	assert.Equal(t, []string{"Init"}, calls, "nothing but Init reaches go-dcgm when Init failed")
	assert.Zero(t, cleanups)
}

func TestLibraryDiagErrors(t *testing.T) {
	for _, c := range []struct {
		name    string
		results []DCGMDiagResult
		runErr  error
		want    string
	}{
		{"unknown status", []DCGMDiagResult{{Test: "memory", Status: "aborted", EntityID: 0}}, nil, `unknown status "aborted"`},
		{"empty status", []DCGMDiagResult{{Test: "memory", Status: "", EntityID: 0}}, nil, "unknown status"},
		{"run fails", nil, errors.New("DCGM_ST_NVVS_ERROR"), "running the diagnostic: DCGM_ST_NVVS_ERROR"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeDCGM{t: t, devices: fakeDevices, results: c.results, runErr: c.runErr}
			_, err := libRunner(t, f, LibraryDiagOptions{}).Run(t.Context(), diagRequest(1, twoGPUs...))
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
			_, cleanups := f.snapshot()
			assert.Equal(t, 1, cleanups)
		})
	}
}

func TestLibraryDiagUnknownGPU(t *testing.T) {
	f := &fakeDCGM{t: t, devices: fakeDevices, results: []DCGMDiagResult{{Test: "memory", Status: "pass", EntityID: 0}}}
	res, err := libRunner(t, f, LibraryDiagOptions{}).Run(t.Context(), diagRequest(1, GPU{UUID: "GPU-a", Index: 0}, GPU{UUID: "GPU-gone", Index: 3}))
	require.NoError(t, err)
	assert.True(t, res[0].Passed)
	assert.False(t, res[1].Passed)
	assert.Contains(t, res[1].Detail, "DCGM does not list GPU 3 (GPU-gone)")
	assert.Equal(t, []uint{0}, f.ran)

	// No GPU DCGM knows: no diagnostic at all, every GPU fails.
	f = &fakeDCGM{t: t, devices: fakeDevices}
	res, err = libRunner(t, f, LibraryDiagOptions{}).Run(t.Context(), diagRequest(1, GPU{UUID: "GPU-gone", Index: 3}))
	require.NoError(t, err)
	assert.False(t, res[0].Passed)
	calls, _ := f.snapshot()
	assert.Equal(t, []string{"Init", "GPUs"}, calls)
}

// DCGM cannot stop its diagnostic: a cancelled Run returns at once, the
// next one waits for DCGM, and Close waits too.
func TestLibraryDiagCancel(t *testing.T) {
	f := &fakeDCGM{t: t, devices: fakeDevices, results: []DCGMDiagResult{{Test: "memory", Status: "pass", EntityID: 0}},
		block: make(chan struct{}), entered: make(chan struct{}, 1)}
	r, err := NewLibraryDiag(f, LibraryDiagOptions{})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := r.Run(ctx, diagRequest(1, GPU{UUID: "GPU-a", Index: 0}))
		errc <- err
	}()
	<-f.entered
	cancel()
	err = <-errc
	require.ErrorIs(t, err, context.Canceled)

	// A second run gives up when its ctx ends while DCGM still runs the first.
	ctx2, cancel2 := context.WithCancel(t.Context())
	cancel2()
	_, err = r.Run(ctx2, diagRequest(1, GPU{UUID: "GPU-a", Index: 0}))
	require.ErrorIs(t, err, context.Canceled)
	closeCtx, cancelClose := context.WithCancel(t.Context())
	cancelClose()
	assert.Error(t, r.Close(closeCtx), "Close reports the diagnostic still running")

	close(f.block)
	require.NoError(t, r.Close(context.Background()))
	_, cleanups := f.snapshot()
	assert.Equal(t, 1, cleanups)

	// DCGM is free again: the next run goes through.
	f.block, f.entered = nil, nil
	res, err := r.Run(t.Context(), diagRequest(1, GPU{UUID: "GPU-a", Index: 0}))
	require.NoError(t, err)
	assert.True(t, res[0].Passed)
}

func TestLibraryDiagTimeout(t *testing.T) {
	f := &fakeDCGM{t: t, devices: fakeDevices, block: make(chan struct{})}
	r, err := NewLibraryDiag(f, LibraryDiagOptions{Timeouts: DiagTimeouts{Quick: 10 * time.Millisecond}})
	require.NoError(t, err)
	_, err = r.Run(t.Context(), diagRequest(1, GPU{UUID: "GPU-a", Index: 0}))
	require.ErrorIs(t, err, errTimedOut)
	close(f.block)
	require.NoError(t, r.Close(context.Background()))
}

func TestNewLibraryDiagRefuses(t *testing.T) {
	_, err := NewLibraryDiag(nil, LibraryDiagOptions{})
	assert.Error(t, err)
	_, err = NewLibraryDiag(&fakeDCGM{t: t}, LibraryDiagOptions{Timeouts: DiagTimeouts{Quick: -1}})
	assert.Error(t, err)
}

// The production library without a host engine: Init fails (no
// libdcgm.so.4 on a build machine, or no cgo), and nothing else is called.
func TestDCGMLibWithoutDCGM(t *testing.T) {
	lib := NewDCGMLib(false, "unix:///nonexistent/nv-hostengine.sock")
	_, err := lib.GPUs()
	assert.Error(t, err, "no call before Init")
	_, err = lib.RunDiag(1, []uint{0})
	assert.Error(t, err, "no call before Init")
}
