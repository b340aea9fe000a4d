package attribution

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestSettingsDefaultsAndValidation(t *testing.T) {
	a, err := New(Settings{Kubelet: true}, nil)
	require.NoError(t, err)
	assert.Equal(t, DefaultKubeletSocket, a.settings.KubeletSocket)
	assert.Equal(t, DefaultHPCJobMappingDir, a.settings.HPCJobMappingDir)
	assert.Equal(t, DefaultProcRoot, a.settings.ProcRoot)
	assert.Equal(t, DefaultTimeout, a.settings.Timeout)
	assert.Equal(t, DefaultRefreshInterval, a.RefreshInterval())
	assert.True(t, a.Owner(testGPUs[0]).IsZero(), "empty before the first Refresh")

	// Every source enabled, at its default location, is valid.
	d := Settings{Kubelet: true, HPCJobMapping: true, SlurmProcesses: true}.withDefaults()
	assert.True(t, d.Kubelet && d.HPCJobMapping && d.SlurmProcesses)
	require.NoError(t, d.Validate())

	_, err = New(Settings{Timeout: -time.Second}, zap.NewNop())
	assert.ErrorContains(t, err, "dcgmreceiver: attribution: timeout")
	_, err = New(Settings{RefreshInterval: -time.Second}, zap.NewNop())
	assert.ErrorContains(t, err, "refresh interval")
}

func TestAllSourcesTogether(t *testing.T) {
	socket := shortSocketPath(t)
	srv := &fakeKubelet{}
	srv.set([]*podresourcesv1.PodResources{
		pod("ml", "trainer-0", container("trainer", "nvidia.com/gpu", testGPUs[0].UUID)),
	}, nil)
	serveKubelet(t, socket, srv)

	hpcDir := t.TempDir()
	writeFiles(t, hpcDir, map[string]string{"1": "500\n", "2": "600\n"})
	procRoot := fakeProc(t, map[int][2]string{
		10: {"0::/system.slice/slurmstepd.scope/job_500/step_0/user/task_0\n", environ("TORCHELASTIC_RUN_ID=run-500")},
		20: {"0::/system.slice/slurmstepd.scope/job_999/step_0/user/task_0\n", environ("TORCHELASTIC_RUN_ID=run-999")},
		30: {"0::/system.slice/slurmstepd.scope/job_700/step_0/user/task_0\n", environ()},
	})

	a, err := New(Settings{
		Kubelet: true, KubeletSocket: socket,
		HPCJobMapping: true, HPCJobMappingDir: hpcDir,
		SlurmProcesses: true, ProcRoot: procRoot,
	}, zaptest.NewLogger(t))
	require.NoError(t, err)
	pids := map[string][]int{
		testGPUs[1].UUID: {10},
		testGPUs[2].UUID: {20},
		testGPUs[3].UUID: {30},
	}
	require.NoError(t, a.Refresh(context.Background(), testGPUs, pids))

	assert.Equal(t, model.Owner{PodName: "trainer-0", Namespace: "ml", Container: "trainer"}, a.Owner(testGPUs[0]))
	// The mapping file and the process agree: torchrun's id names the run.
	assert.Equal(t, model.Owner{SlurmJobID: "500", TrainingJobID: "run-500"}, a.Owner(testGPUs[1]))
	// They disagree: the scheduler's file wins, and the other job's run id
	// is not attached to it.
	assert.Equal(t, model.Owner{SlurmJobID: "600", TrainingJobID: "600"}, a.Owner(testGPUs[2]))
	// Only the process knows.
	assert.Equal(t, model.Owner{SlurmJobID: "700", TrainingJobID: "700"}, a.Owner(testGPUs[3]))
}

// A missing socket is logged once over many refreshes, the other sources
// keep working, and the recovery and a later failure are logged once each.
func TestFailingSourceLoggedOncePerStateChange(t *testing.T) {
	socket := shortSocketPath(t) // nothing listens yet
	hpcDir := t.TempDir()
	writeFiles(t, hpcDir, map[string]string{"0": "4242\n"})

	core, logs := observer.New(zapcore.InfoLevel)
	a, err := New(Settings{
		Kubelet: true, KubeletSocket: socket, Timeout: time.Second,
		HPCJobMapping: true, HPCJobMappingDir: hpcDir,
	}, zap.New(core))
	require.NoError(t, err)

	refresh := func(n int) {
		for range n {
			require.NoError(t, a.Refresh(context.Background(), testGPUs, nil))
		}
	}
	kubeletLogs := func(snippet string) []observer.LoggedEntry {
		return logs.FilterMessageSnippet(snippet).FilterField(zap.String("source", "kubelet pod-resources")).AllUntimed()
	}

	refresh(5)
	failing := kubeletLogs("source failing")
	require.Len(t, failing, 1)
	assert.Equal(t, zapcore.InfoLevel, failing[0].Level, "an absent socket is normal on a Slurm node")
	assert.Contains(t, failing[0].ContextMap()["error"], "no such file")
	assert.Equal(t, model.Owner{SlurmJobID: "4242", TrainingJobID: "4242"}, a.Owner(testGPUs[0]),
		"the other sources still count")

	srv := &fakeKubelet{}
	srv.set([]*podresourcesv1.PodResources{pod("ml", "p", container("c", "nvidia.com/gpu", testGPUs[0].UUID))}, nil)
	stop := serveKubelet(t, socket, srv)
	refresh(3)
	assert.Len(t, kubeletLogs("source recovered"), 1)
	assert.Equal(t, model.Owner{PodName: "p", Namespace: "ml", Container: "c", SlurmJobID: "4242", TrainingJobID: "4242"},
		a.Owner(testGPUs[0]))

	// The kubelet goes away: its attributes go too, never served stale.
	stop()
	refresh(3)
	assert.Len(t, kubeletLogs("source failing"), 2)
	assert.Len(t, kubeletLogs("source recovered"), 1)
	assert.Equal(t, model.Owner{SlurmJobID: "4242", TrainingJobID: "4242"}, a.Owner(testGPUs[0]))
	assert.Len(t, logs.FilterMessageSnippet("HPC").AllUntimed(), 0, "the healthy source logged nothing")
}

func TestRefreshWithEndedContextKeepsThePreviousMap(t *testing.T) {
	hpcDir := t.TempDir()
	writeFiles(t, hpcDir, map[string]string{"0": "4242\n"})
	a, err := New(hpcOnly(hpcDir), zap.NewNop())
	require.NoError(t, err)
	require.NoError(t, a.Refresh(context.Background(), nil, nil))

	writeFiles(t, hpcDir, map[string]string{"0": "5353\n"})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = a.Refresh(ctx, nil, nil)
	require.ErrorIs(t, err, context.Canceled)
	assert.ErrorContains(t, err, "dcgmreceiver: attribution: refresh")
	assert.Equal(t, "4242", a.Owner(model.GPU{Index: 0}).SlurmJobID)
	assert.False(t, a.hpc.failing, "the caller giving up is not the source failing")
}

func TestOwnerDuringRefreshIsRaceFree(t *testing.T) {
	socket := shortSocketPath(t)
	srv := &fakeKubelet{}
	srv.set([]*podresourcesv1.PodResources{pod("ml", "p", container("c", "nvidia.com/gpu", testGPUs[0].UUID))}, nil)
	serveKubelet(t, socket, srv)
	hpcDir := t.TempDir()
	writeFiles(t, hpcDir, map[string]string{"1": "4242\n"})
	procRoot := fakeProc(t, map[int][2]string{10: {cgroupV2Slurm, environ()}})

	a, err := New(Settings{
		Kubelet: true, KubeletSocket: socket,
		HPCJobMapping: true, HPCJobMappingDir: hpcDir,
		SlurmProcesses: true, ProcRoot: procRoot,
	}, zap.NewNop())
	require.NoError(t, err)
	pids := map[string][]int{testGPUs[2].UUID: {10}}

	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for range 10 {
				assert.NoError(t, a.Refresh(context.Background(), testGPUs, pids))
			}
		})
	}
	// Readers see either nothing (before the first Refresh lands) or the
	// whole answer, never a half-built map.
	want := []model.Owner{
		{PodName: "p", Namespace: "ml", Container: "c"},
		{SlurmJobID: "4242", TrainingJobID: "4242"},
		{SlurmJobID: "12345", TrainingJobID: "12345"},
	}
	for range 4 {
		wg.Go(func() {
			for range 500 {
				for i, gpu := range testGPUs[:3] {
					if o := a.Owner(gpu); !o.IsZero() && o != want[i] {
						t.Errorf("GPU %d: owner %+v, want %+v", i, o, want[i])
						return
					}
				}
			}
		})
	}
	wg.Wait()
	assert.Equal(t, "p", a.Owner(testGPUs[0]).PodName)
	assert.Equal(t, "4242", a.Owner(testGPUs[1]).SlurmJobID)
	assert.Equal(t, "12345", a.Owner(testGPUs[2]).SlurmJobID)
}
