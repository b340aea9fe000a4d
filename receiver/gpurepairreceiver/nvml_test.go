package gpurepairreceiver

import (
	"context"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpurepairreceiver/internal/verify"
)

func processList(pids ...uint32) func() ([]nvml.ProcessInfo, nvml.Return) {
	return func() ([]nvml.ProcessInfo, nvml.Return) {
		infos := make([]nvml.ProcessInfo, len(pids))
		for i, pid := range pids {
			infos[i] = nvml.ProcessInfo{Pid: pid}
		}
		return infos, nvml.SUCCESS
	}
}

func processError(ret nvml.Return) func() ([]nvml.ProcessInfo, nvml.Return) {
	return func() ([]nvml.ProcessInfo, nvml.Return) { return nil, ret }
}

// idleServer is the DGX A100 mock with no process on any GPU.
func idleServer() *server.Server {
	srv := dgxa100.New()
	for i := range srv.Devices {
		d := srv.Devices[i].(*server.Device)
		d.GetComputeRunningProcessesFunc = processList()
		d.GetGraphicsRunningProcessesFunc = processList()
	}
	return srv
}

func dev(srv *server.Server, i int) *server.Device { return srv.Devices[i].(*server.Device) }

func newTestNVML(lib nvml.Interface) *nvmlDevices {
	return newNVMLDevices(lib, time.Minute, &commandReset{argv: []string{"true", "{index}"}, timeout: time.Minute})
}

func TestNVMLInventoryAndProcesses(t *testing.T) {
	srv := idleServer()
	dev(srv, 2).GetComputeRunningProcessesFunc = processList(42, 0, 7)
	dev(srv, 2).GetGraphicsRunningProcessesFunc = processList(7)
	dev(srv, 3).GetGraphicsRunningProcessesFunc = processError(nvml.ERROR_NOT_SUPPORTED)
	dev(srv, 4).GetComputeRunningProcessesFunc = processError(nvml.ERROR_NOT_SUPPORTED)
	dev(srv, 5).GetGraphicsRunningProcessesFunc = processError(nvml.ERROR_GPU_IS_LOST)
	d := newTestNVML(srv)
	ctx := context.Background()
	defer func() { require.NoError(t, d.Shutdown(ctx)) }()

	inv, err := d.Inventory(ctx)
	require.NoError(t, err)
	require.Len(t, inv, 8)
	assert.Equal(t, verify.GPU{UUID: dev(srv, 3).UUID, Index: 3}, inv[3])

	procs, err := d.Processes(ctx)
	require.NoError(t, err)
	assert.Equal(t, []int{7, 42}, procs[dev(srv, 2).UUID])
	assert.Equal(t, []int{}, procs[dev(srv, 3).UUID], "graphics not supported: compute decides")
	_, ok := procs[dev(srv, 4).UUID]
	assert.False(t, ok, "compute query not supported: unknown, so busy")
	_, ok = procs[dev(srv, 5).UUID]
	assert.False(t, ok, "a failing query: unknown")
	assert.Equal(t, []int{}, procs[dev(srv, 0).UUID])
}

func TestNVMLMIGProcesses(t *testing.T) {
	srv := idleServer()
	d0 := dev(srv, 0)
	d0.MigMode = nvml.DEVICE_MIG_ENABLE
	d0.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return 3, nvml.SUCCESS }
	migs := map[int]*mock.Device{
		0: {GetComputeRunningProcessesFunc: processList(500), GetGraphicsRunningProcessesFunc: processError(nvml.ERROR_NOT_SUPPORTED)},
		2: {GetComputeRunningProcessesFunc: processList(600, 500), GetGraphicsRunningProcessesFunc: processError(nvml.ERROR_NOT_SUPPORTED)},
	}
	d0.GetMigDeviceHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		if m, ok := migs[i]; ok {
			return m, nvml.SUCCESS
		}
		return nil, nvml.ERROR_NOT_FOUND
	}
	d := newTestNVML(srv)
	ctx := context.Background()
	defer func() { require.NoError(t, d.Shutdown(ctx)) }()
	procs, err := d.Processes(ctx)
	require.NoError(t, err)
	assert.Equal(t, []int{500, 600}, procs[d0.UUID])

	migs[2].GetComputeRunningProcessesFunc = processError(nvml.ERROR_NO_PERMISSION)
	procs, err = d.Processes(ctx)
	require.NoError(t, err)
	_, ok := procs[d0.UUID]
	assert.False(t, ok, "a MIG device that does not answer makes its GPU unknown")
}

func TestNVMLFailuresFailClosed(t *testing.T) {
	ctx := context.Background()
	srv := idleServer()
	srv.InitFunc = func() nvml.Return { return nvml.ERROR_DRIVER_NOT_LOADED }
	d := newTestNVML(srv)
	_, err := d.Inventory(ctx)
	assert.ErrorContains(t, err, "init")
	_, err = d.Processes(ctx)
	assert.Error(t, err)

	srv = idleServer()
	dev(srv, 6).GetUUIDFunc = func() (string, nvml.Return) { return "", nvml.ERROR_GPU_IS_LOST }
	d = newTestNVML(srv)
	_, err = d.Inventory(ctx)
	assert.ErrorContains(t, err, "GPU 6", "a GPU NVML cannot read fails the inventory: never a verification without it")
	require.NoError(t, d.Shutdown(ctx))

	// A driver without the process query: unknown.
	srv = idleServer()
	srv.LookupSymbolFunc = func(name string) error {
		if name == "nvmlDeviceGetComputeRunningProcesses" || name == "nvmlDeviceGetComputeRunningProcesses_v2" || name == "nvmlDeviceGetComputeRunningProcesses_v3" {
			return nvml.ERROR_FUNCTION_NOT_FOUND
		}
		return nil
	}
	d = newTestNVML(srv)
	procs, err := d.Processes(ctx)
	require.NoError(t, err)
	assert.Empty(t, procs)
	require.NoError(t, d.Shutdown(ctx))
}

// A call that does not return in time fails, and no other call is made
// until it has returned.
func TestNVMLStuckCall(t *testing.T) {
	ctx := context.Background()
	srv := idleServer()
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	dev(srv, 1).GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		entered <- struct{}{}
		<-release
		return nil, nvml.SUCCESS
	}
	d := newNVMLDevices(srv, 20*time.Millisecond, nil)
	procs, err := d.Processes(ctx)
	require.NoError(t, err, "the stuck GPU is left out, the call before it answered")
	assert.Len(t, procs, 1, "GPU 0 answered; GPU 1 hung; the rest were not asked")
	<-entered
	_, err = d.Inventory(ctx)
	assert.ErrorContains(t, err, "has not returned")
	close(release)
	for {
		if _, err = d.Inventory(ctx); err == nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	require.NoError(t, d.Shutdown(ctx))
}
