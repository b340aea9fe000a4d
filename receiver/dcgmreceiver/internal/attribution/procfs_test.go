package attribution

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
)

// cgroup files as Slurm's cgroup plugins lay them out.
const (
	cgroupV2Slurm = "0::/system.slice/slurmstepd.scope/job_12345/step_0/user/task_0\n"
	cgroupV1Slurm = "12:pids:/slurm/uid_1000/job_777/step_batch/task_0\n" +
		"11:memory:/slurm/uid_1000/job_777/step_batch/task_0\n" +
		"4:devices:/slurm/uid_1000/job_777/step_batch/task_0\n" +
		"1:name=systemd:/system.slice/slurmd.service\n" +
		"0::/system.slice/slurmd.service\n"
	cgroupNamespaced = "0::/\n"
	cgroupKubepods   = "0::/kubepods.slice/kubepods-pod1234.slice/cri-containerd-abcd.scope\n"
)

func environ(vars ...string) string { return strings.Join(vars, "\x00") + "\x00" }

// fakeProc builds a /proc tree in a temp dir: one directory per pid with
// the given cgroup and environ files.
func fakeProc(t *testing.T, procs map[int][2]string) string {
	t.Helper()
	root := t.TempDir()
	for pid, files := range procs {
		dir := filepath.Join(root, strconv.Itoa(pid))
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "cgroup"), []byte(files[0]), 0o444))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "environ"), []byte(files[1]), 0o400))
	}
	return root
}

func procsOnly(root string) Settings {
	return Settings{SlurmProcesses: true, ProcRoot: root, Timeout: 2 * time.Second}
}

func TestProcessesGiveSlurmJobAndTrainingRun(t *testing.T) {
	root := fakeProc(t, map[int][2]string{
		// cgroup v2 job with torchrun's run id in its environment
		100: {cgroupV2Slurm, environ("PATH=/usr/bin", "SLURM_JOB_ID=12345", "TORCHELASTIC_RUN_ID=llama-405b-run7")},
		// cgroup v1 job; SLURM_JOB_ID disagrees: the cgroup wins
		200: {cgroupV1Slurm, environ("SLURM_JOB_ID=1")},
		// own cgroup namespace: only the environment tells (old name)
		300: {cgroupNamespaced, environ("HOME=/root", "SLURM_JOBID=888")},
		// a Kubernetes container running torchrun without a rendezvous id
		400: {cgroupKubepods, environ("TORCHELASTIC_RUN_ID=none")},
		// a Kubernetes container with a real run id, no Slurm
		500: {cgroupKubepods, environ("TORCHELASTIC_RUN_ID=ft-job-3")},
	})
	pids := map[string][]int{
		testGPUs[0].UUID: {100},
		testGPUs[1].UUID: {999, 200}, // 999 exited meanwhile: skipped quietly
		testGPUs[2].UUID: {300},
		testGPUs[3].UUID: {400},
		testGPUs[4].UUID: {500, 100}, // a Slurm process beats a torchrun id alone
		"GPU-not-listed": {500},
	}
	core, logs := observer.New(zapcore.InfoLevel)
	a, err := New(procsOnly(root), zap.New(core))
	require.NoError(t, err)
	require.NoError(t, a.Refresh(context.Background(), testGPUs, pids))

	assert.Equal(t, model.Owner{SlurmJobID: "12345", TrainingJobID: "llama-405b-run7"}, a.Owner(testGPUs[0]))
	assert.Equal(t, model.Owner{SlurmJobID: "777", TrainingJobID: "777"}, a.Owner(testGPUs[1]))
	assert.Equal(t, model.Owner{SlurmJobID: "888", TrainingJobID: "888"}, a.Owner(testGPUs[2]))
	assert.Equal(t, model.Owner{}, a.Owner(testGPUs[3]))
	// GPU 4's processes are keyed by the parent UUID: every instance gets them.
	assert.Equal(t, model.Owner{SlurmJobID: "12345", TrainingJobID: "llama-405b-run7"}, a.Owner(testGPUs[5]))
	assert.Equal(t, model.Owner{TrainingJobID: "ft-job-3"}, a.Owner(model.GPU{UUID: "GPU-not-listed", Index: 42}))
	assert.Zero(t, logs.Len(), "exited processes are not failures: %v", logs.All())
}

func TestProcessReadFailureIsReportedOnce(t *testing.T) {
	root := fakeProc(t, map[int][2]string{100: {cgroupV2Slurm, ""}})
	// An environ that cannot be read as a file (root reads any file, so a
	// directory stands in for "permission denied").
	require.NoError(t, os.Remove(filepath.Join(root, "100", "environ")))
	require.NoError(t, os.Mkdir(filepath.Join(root, "100", "environ"), 0o755))

	core, logs := observer.New(zapcore.InfoLevel)
	a, err := New(procsOnly(root), zap.New(core))
	require.NoError(t, err)
	pids := map[string][]int{testGPUs[0].UUID: {100}}
	for range 3 {
		require.NoError(t, a.Refresh(context.Background(), testGPUs, pids))
	}
	// The cgroup still names the job.
	assert.Equal(t, "12345", a.Owner(testGPUs[0]).SlurmJobID)
	assert.Equal(t, 1, logs.FilterMessageSnippet("source failing").Len())
}

// A process stuck in the GPU driver can hold the lock reading its environ
// needs: the read is abandoned at the timeout, the other GPUs still get
// their job, and the next refresh does not wait on the same pid again.
func TestHangingProcessReadIsAbandoned(t *testing.T) {
	root := fakeProc(t, map[int][2]string{
		100: {cgroupV2Slurm, environ()},
		200: {cgroupV1Slurm, environ()},
	})
	core, logs := observer.New(zapcore.InfoLevel)
	set := procsOnly(root)
	set.Timeout = 200 * time.Millisecond
	a, err := New(set, zap.New(core))
	require.NoError(t, err)

	release := make(chan struct{})
	var calls atomic.Int32
	a.readProcessFiles = func(dir string) (processJob, error) {
		if filepath.Base(dir) == "100" {
			calls.Add(1)
			<-release
		}
		return readProcessFiles(dir)
	}
	defer func() {
		close(release)
		require.NoError(t, a.procGuard.Wait(context.Background()))
	}()

	// GPU 1's pid sorts first by UUID: it is read before the stuck one.
	pids := map[string][]int{testGPUs[1].UUID: {200}, testGPUs[2].UUID: {100}}
	for range 2 {
		start := time.Now()
		require.NoError(t, a.Refresh(context.Background(), testGPUs, pids))
		assert.Less(t, time.Since(start), 2*time.Second)
	}
	assert.Equal(t, "777", a.Owner(testGPUs[1]).SlurmJobID)
	assert.True(t, a.Owner(testGPUs[2]).IsZero())
	assert.Equal(t, int32(1), calls.Load(), "a stuck pid is not read again while stuck")
	failing := logs.FilterMessageSnippet("source failing").AllUntimed()
	require.Len(t, failing, 1)
	// The per-read deadline and the refresh's own deadline are the same
	// instant; under load either may be the one that reports it.
	msg := failing[0].ContextMap()["error"].(string)
	assert.True(t, strings.Contains(msg, "did not return in time") || strings.Contains(msg, "deadline exceeded"), msg)
}

func TestProcRootMissing(t *testing.T) {
	a, err := New(procsOnly(filepath.Join(t.TempDir(), "proc")), zap.NewNop())
	require.NoError(t, err)
	require.NoError(t, a.Refresh(context.Background(), testGPUs, map[string][]int{testGPUs[0].UUID: {1}}))
	assert.True(t, a.procs.failing)
	assert.True(t, a.Owner(testGPUs[0]).IsZero())
}

func TestParseSlurmCgroup(t *testing.T) {
	tests := []struct {
		content string
		want    string
	}{
		{cgroupV2Slurm, "12345"},
		{cgroupV1Slurm, "777"},
		{"0::/system.slice/node1_slurmstepd.scope/job_42/step_extern/slurm_processes\n", "42"},
		{"5:cpuset:/slurm_node7/uid_0/job_9/step_0\n", "9"},
		{"0::/system.slice/slurmstepd.scope/job_12345", "12345"}, // no trailing newline
		{cgroupNamespaced, ""},
		{cgroupKubepods, ""},
		{"0::/user.slice/job_55/step_0\n", ""},             // no Slurm above it
		{"0::/system.slice/slurmstepd.scope/job_x/\n", ""}, // not a number
		{"0::/system.slice/slurmstepd.scope/job_/\n", ""},
		{"0::/slurm/job_123456789012345678901\n", ""}, // more than 64 bits
		{"garbage without colons\n", ""},
		{"", ""},
		{"0::/slurm/uid_1/job_5:odd:path\n", ""},
		{"0::/a:b/slurm/job_6\n", "6"}, // colons inside the path
	}
	for _, tt := range tests {
		got, ok := parseSlurmCgroup([]byte(tt.content))
		assert.Equal(t, tt.want, got, "%q", tt.content)
		assert.Equal(t, tt.want != "", ok, "%q", tt.content)
	}
}

func FuzzParseSlurmCgroup(f *testing.F) {
	for _, seed := range []string{cgroupV2Slurm, cgroupV1Slurm, cgroupNamespaced, cgroupKubepods,
		"0::/slurm/job_1", "0::/slurm/job_", "::", "\n\n", "0::/slurm/job_00000000000000000000"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, content []byte) {
		id, ok := parseSlurmCgroup(content)
		if ok != (id != "") {
			t.Fatalf("ok=%v with id %q", ok, id)
		}
		if !ok {
			return
		}
		if !isJobNumber(id) {
			t.Fatalf("job id %q is not a number", id)
		}
		if !strings.Contains(string(content), "job_"+id) {
			t.Fatalf("job id %q is not in the input %q", id, content)
		}
	})
}

func TestParseEnviron(t *testing.T) {
	tests := []struct {
		environ      string
		job, trainID string
	}{
		{environ("SLURM_JOB_ID=12345", "TORCHELASTIC_RUN_ID=run-1"), "12345", "run-1"},
		{environ("SLURM_JOBID=7", "SLURM_JOB_ID=8"), "8", ""},
		{environ("SLURM_JOBID=7"), "7", ""},
		{environ("TORCHELASTIC_RUN_ID=None"), "", ""},
		{environ("TORCHELASTIC_RUN_ID="), "", ""},
		{environ("TORCHELASTIC_RUN_ID=a\x01b"), "", ""},
		{environ("SLURM_JOB_ID=abc"), "", ""},
		{environ("NOT_SLURM_JOB_ID=5", "SLURM_JOB_ID_X=6"), "", ""},
		{"SLURM_JOB_ID=9", "9", ""}, // no trailing NUL
		{"\x00\x00=\x00SLURM_JOB_ID", "", ""},
		{"", "", ""},
	}
	for _, tt := range tests {
		job, runID := parseEnviron([]byte(tt.environ))
		assert.Equal(t, tt.job, job, "%q", tt.environ)
		assert.Equal(t, tt.trainID, runID, "%q", tt.environ)
	}
}

func FuzzParseEnviron(f *testing.F) {
	f.Add([]byte(environ("SLURM_JOB_ID=12345", "TORCHELASTIC_RUN_ID=run-1")))
	f.Add([]byte(environ("SLURM_JOBID=7", "TORCHELASTIC_RUN_ID=none")))
	f.Fuzz(func(t *testing.T, content []byte) {
		job, runID := parseEnviron(content)
		if job != "" && !isJobNumber(job) {
			t.Fatalf("job id %q is not a number", job)
		}
		if len(runID) > maxRunIDLen || strings.ContainsFunc(runID, isControl) {
			t.Fatalf("run id %q is not a valid attribute", runID)
		}
	})
}
