package nvmlsrc

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/source"
)

// processList is what a mocked process query returns.
func processList(pids ...uint32) func() ([]nvml.ProcessInfo, nvml.Return) {
	return func() ([]nvml.ProcessInfo, nvml.Return) {
		infos := make([]nvml.ProcessInfo, len(pids))
		for i, pid := range pids {
			infos[i] = nvml.ProcessInfo{Pid: pid, UsedGpuMemory: 1 << 30}
		}
		return infos, nvml.SUCCESS
	}
}

func processError(ret nvml.Return) func() ([]nvml.ProcessInfo, nvml.Return) {
	return func() ([]nvml.ProcessInfo, nvml.Return) { return nil, ret }
}

// processServer is the DGX A100 mock where GPU i runs compute processes
// 1000+i and 2000+i and graphics process 3000+i.
func processServer() *server.Server {
	srv := newServer()
	for i := range srv.Devices {
		d := mockDevice(srv, i)
		d.GetComputeRunningProcessesFunc = processList(1000+uint32(i), 2000+uint32(i))
		d.GetGraphicsRunningProcessesFunc = processList(3000 + uint32(i))
	}
	return srv
}

func TestProcessesIsASourceProcesses(t *testing.T) {
	var m source.Metrics = New(processServer(), testTimeout, zaptest.NewLogger(t))
	_, ok := m.(source.Processes)
	assert.True(t, ok, "the receiver finds Processes by a type assertion on its Metrics source")
}

func TestProcessesPerGPU(t *testing.T) {
	srv := processServer()
	// GPU 0: one process with a compute and a graphics context, a pid
	// listed twice, unsorted, and NVML's empty entry (pid 0).
	mockDevice(srv, 0).GetComputeRunningProcessesFunc = processList(42, 7, 42, 0)
	mockDevice(srv, 0).GetGraphicsRunningProcessesFunc = processList(9, 7)
	// GPU 1: idle.
	mockDevice(srv, 1).GetComputeRunningProcessesFunc = processList()
	mockDevice(srv, 1).GetGraphicsRunningProcessesFunc = processList()
	s := startSource(t, srv, nil)
	defer shutdown(t, s)

	got, err := s.Processes(context.Background())
	require.NoError(t, err)
	want := map[string][]int{
		mockDevice(srv, 0).UUID: {7, 9, 42},
		mockDevice(srv, 1).UUID: {},
	}
	for i := 2; i < len(srv.Devices); i++ {
		want[mockDevice(srv, i).UUID] = []int{1000 + i, 2000 + i, 3000 + i}
	}
	assert.Equal(t, want, got)
	assert.NotNil(t, got[mockDevice(srv, 1).UUID], "an idle GPU has an empty list, not none")
}

func TestProcessesNotSupportedAndErrors(t *testing.T) {
	srv := processServer()
	// GPU 1 supports neither query: no processes.
	mockDevice(srv, 1).GetComputeRunningProcessesFunc = processError(nvml.ERROR_NOT_SUPPORTED)
	mockDevice(srv, 1).GetGraphicsRunningProcessesFunc = processError(nvml.ERROR_NOT_SUPPORTED)
	// GPU 2 has no graphics (a compute-only part).
	mockDevice(srv, 2).GetGraphicsRunningProcessesFunc = processError(nvml.ERROR_NOT_SUPPORTED)
	// GPU 3 answers neither: its processes are unknown.
	mockDevice(srv, 3).GetComputeRunningProcessesFunc = processError(nvml.ERROR_NO_PERMISSION)
	mockDevice(srv, 3).GetGraphicsRunningProcessesFunc = processError(nvml.ERROR_GPU_IS_LOST)
	// GPU 4 answers one query: what it said is kept.
	mockDevice(srv, 4).GetComputeRunningProcessesFunc = processError(nvml.ERROR_UNKNOWN)
	s := startSource(t, srv, nil)
	defer shutdown(t, s)

	got, err := s.Processes(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []int{}, got[mockDevice(srv, 1).UUID])
	assert.Equal(t, []int{1002, 2002}, got[mockDevice(srv, 2).UUID])
	assert.NotContains(t, got, mockDevice(srv, 3).UUID)
	assert.Equal(t, []int{3004}, got[mockDevice(srv, 4).UUID])
	assert.Equal(t, []int{1000, 2000, 3000}, got[mockDevice(srv, 0).UUID], "other GPUs are untouched")
	assert.Len(t, got, 7)
}

func TestProcessesSkipsAHungGPU(t *testing.T) {
	srv := processServer()
	release := make(chan struct{})
	hung := mockDevice(srv, 5)
	hung.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		<-release
		return nil, nvml.SUCCESS
	}
	s := startSource(t, srv, nil)
	defer func() {
		close(release)
		require.NoError(t, s.guard.Wait(context.Background()))
		shutdown(t, s)
	}()

	for round := range 2 {
		start := time.Now()
		got, err := s.Processes(context.Background())
		require.NoError(t, err, "an unresponsive GPU is not an error")
		assert.Less(t, time.Since(start), 10*testTimeout, "round %d: one hung GPU does not hold up the others", round)
		assert.NotContains(t, got, hung.UUID, "round %d", round)
		require.Len(t, got, 7, "round %d", round)
		for i := range srv.Devices {
			if i != 5 {
				assert.Equal(t, []int{1000 + i, 2000 + i, 3000 + i}, got[mockDevice(srv, i).UUID], "round %d: GPU %d", round, i)
			}
		}
	}
	assert.Len(t, hung.GetComputeRunningProcessesCalls(), 1, "a stuck GPU is not called again")
	assert.Empty(t, hung.GetGraphicsRunningProcessesCalls(), "no call after the one that hung")
}

func TestProcessesBeforeStartAndAfterShutdown(t *testing.T) {
	srv := processServer()
	s := New(srv, testTimeout, zaptest.NewLogger(t))
	_, err := s.Processes(context.Background())
	require.ErrorContains(t, err, "dcgmreceiver: nvml: processes: source not started")

	require.NoError(t, s.Start(context.Background(), nil))
	got, err := s.Processes(context.Background())
	require.NoError(t, err)
	assert.Len(t, got, 8)

	shutdown(t, s)
	_, err = s.Processes(context.Background())
	require.ErrorContains(t, err, "not started")
}

func TestProcessesHonoursContext(t *testing.T) {
	srv := processServer()
	s := startSource(t, srv, nil)
	defer shutdown(t, s)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got, err := s.Processes(ctx)
	require.ErrorIs(t, err, context.Canceled)
	assert.Nil(t, got)
	require.NoError(t, s.guard.Wait(context.Background()))
}

func TestProcessesOfMIGDevicesGoToTheParent(t *testing.T) {
	srv := processServer()
	d := mockDevice(srv, 0)
	d.MigMode = nvml.DEVICE_MIG_ENABLE
	// Without privileges, NVML does not aggregate MIG instances on the parent.
	d.GetComputeRunningProcessesFunc = processError(nvml.ERROR_NO_PERMISSION)
	d.GetGraphicsRunningProcessesFunc = processError(nvml.ERROR_NO_PERMISSION)
	d.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return 2, nvml.SUCCESS }
	migs := []*mock.Device{
		migMock(1, processList(500, 501)),
		migMock(2, processList(501, 600)), // 501 spans both instances
	}
	d.GetMigDeviceHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) { return migs[i], nvml.SUCCESS }
	s := startSource(t, srv, nil)
	defer shutdown(t, s)

	got, err := s.Processes(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []int{500, 501, 600}, got[d.UUID])
	assert.Len(t, got, 8, "MIG devices are not keys of their own")
	for _, mig := range migs {
		assert.Len(t, mig.GetComputeRunningProcessesCalls(), 1)
		assert.Len(t, mig.GetGraphicsRunningProcessesCalls(), 1)
	}
}

func TestProcessesMIGParentAggregates(t *testing.T) {
	srv := processServer()
	d := mockDevice(srv, 0)
	d.MigMode = nvml.DEVICE_MIG_ENABLE
	// With privileges the parent lists every instance's processes; the MIG
	// handles repeat them.
	d.GetComputeRunningProcessesFunc = processList(600, 500, 501)
	d.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return 1, nvml.SUCCESS }
	d.GetMigDeviceHandleByIndexFunc = func(int) (nvml.Device, nvml.Return) {
		return migMock(1, processList(500, 501)), nvml.SUCCESS
	}
	s := startSource(t, srv, nil)
	defer shutdown(t, s)

	got, err := s.Processes(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []int{500, 501, 600, 3000}, got[d.UUID])
}

// migMock is a MIG device running the given compute processes, with no
// graphics support.
func migMock(gi int, compute func() ([]nvml.ProcessInfo, nvml.Return)) *mock.Device {
	return &mock.Device{
		GetGpuInstanceIdFunc:            func() (int, nvml.Return) { return gi, nvml.SUCCESS },
		GetComputeInstanceIdFunc:        func() (int, nvml.Return) { return 0, nvml.SUCCESS },
		GetNameFunc:                     func() (string, nvml.Return) { return "NVIDIA A100-SXM4-40GB MIG 1g.5gb", nvml.SUCCESS },
		GetComputeRunningProcessesFunc:  compute,
		GetGraphicsRunningProcessesFunc: processError(nvml.ERROR_NOT_SUPPORTED),
	}
}

func TestProcessesFollowTheDriversFunctions(t *testing.T) {
	srv := processServer()
	missing := map[string]bool{
		// An old driver: only the v1 compute query, no graphics query at all.
		"nvmlDeviceGetComputeRunningProcesses_v3":  true,
		"nvmlDeviceGetComputeRunningProcesses_v2":  true,
		"nvmlDeviceGetGraphicsRunningProcesses_v3": true,
		"nvmlDeviceGetGraphicsRunningProcesses_v2": true,
		"nvmlDeviceGetGraphicsRunningProcesses":    true,
	}
	srv.LookupSymbolFunc = func(name string) error {
		if missing[name] {
			return nvml.ERROR_FUNCTION_NOT_FOUND
		}
		return nil
	}
	s := startSource(t, srv, nil)
	defer shutdown(t, s)

	got, err := s.Processes(context.Background())
	require.NoError(t, err)
	for i := range srv.Devices {
		d := mockDevice(srv, i)
		assert.Equal(t, []int{1000 + i, 2000 + i}, got[d.UUID], "GPU %d: compute processes through v1", i)
		assert.Len(t, d.GetComputeRunningProcessesCalls(), 1)
		assert.Empty(t, d.GetGraphicsRunningProcessesCalls(), "a function the driver lacks is never called")
	}
	var looked []string
	for _, c := range srv.LookupSymbolCalls() {
		if strings.Contains(c.S, "RunningProcesses") {
			looked = append(looked, c.S)
		}
	}
	assert.ElementsMatch(t, []string{
		"nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2", "nvmlDeviceGetComputeRunningProcesses",
		"nvmlDeviceGetGraphicsRunningProcesses_v3", "nvmlDeviceGetGraphicsRunningProcesses_v2", "nvmlDeviceGetGraphicsRunningProcesses",
	}, looked, "each name is looked up once")
}

func TestProcessesLeaveOutGPUsWithoutUUID(t *testing.T) {
	srv := processServer()
	nameless := mockDevice(srv, 6)
	nameless.GetUUIDFunc = func() (string, nvml.Return) { return "", nvml.ERROR_UNKNOWN }
	s := startSource(t, srv, nil)
	defer shutdown(t, s)

	got, err := s.Processes(context.Background())
	require.NoError(t, err)
	assert.Len(t, got, 7)
	assert.NotContains(t, got, "")
	assert.Empty(t, nameless.GetComputeRunningProcessesCalls(), "nothing to key its processes by")
}

func TestSortedUnique(t *testing.T) {
	assert.Equal(t, []int{1, 2, 3}, sortedUnique([]int{3, 1, 2, 3, 1}))
	assert.Equal(t, []int{}, sortedUnique([]int{}))
}

func TestProcessesWithoutTheFunctions(t *testing.T) {
	srv := processServer()
	srv.LookupSymbolFunc = func(name string) error {
		if strings.Contains(name, "RunningProcesses") {
			return nvml.ERROR_FUNCTION_NOT_FOUND
		}
		return nil
	}
	s := startSource(t, srv, nil)
	defer shutdown(t, s)

	got, err := s.Processes(context.Background())
	require.NoError(t, err)
	require.Len(t, got, 8)
	for i := range srv.Devices {
		d := mockDevice(srv, i)
		assert.Equal(t, []int{}, got[d.UUID], "GPU %d: a driver without the queries is 'not supported'", i)
		assert.Empty(t, d.GetComputeRunningProcessesCalls())
	}
}
