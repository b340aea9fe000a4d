package slurm

import (
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestScriptsLint: shellcheck where installed, else bash -n.
func TestScriptsLint(t *testing.T) {
	for _, script := range []string{"prolog.sh", "epilog.sh"} {
		args := []string{"bash", "-n", script}
		if sc, err := exec.LookPath("shellcheck"); err == nil {
			args = []string{sc, "-s", "bash", script}
		}
		out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
		assert.NoError(t, err, "%s: %s", strings.Join(args, " "), out)
		fi, err := os.Stat(script)
		require.NoError(t, err)
		assert.NotZero(t, fi.Mode()&0o111, "%s must be executable (slurmd runs it directly)", script)
	}
}

// runScript runs a script with only the given environment (plus PATH), as
// slurmd would, and returns its standard output.
func runScript(t *testing.T, script string, env map[string]string) string {
	t.Helper()
	cmd := exec.Command("./" + script)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "%s must exit 0; stderr: %s", script, stderr.String())
	return string(out)
}

// exports parses TaskProlog output: every line must be `export K=V`.
func exports(t *testing.T, out string) map[string]string {
	t.Helper()
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if line == "" {
			continue
		}
		kv, ok := strings.CutPrefix(line, "export ")
		require.True(t, ok, "not an export line: %q", line)
		k, v, ok := strings.Cut(kv, "=")
		require.True(t, ok, "not K=V: %q", line)
		require.NotContains(t, got, k, "exported twice")
		got[k] = v
	}
	return got
}

func TestTaskProlog(t *testing.T) {
	dir := t.TempDir()
	plugin := filepath.Join(dir, "libnccl-profiler-inspector.so")
	require.NoError(t, os.WriteFile(plugin, nil, 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "fr"), 0o1777)) // the tmpfiles.d rule's mode
	conf := filepath.Join(dir, "slurm.env")
	require.NoError(t, os.WriteFile(conf, []byte(
		"OTELCOL_GPU_FR_DIR="+dir+"/fr\nOTELCOL_GPU_INSPECTOR_DIR="+dir+"/insp\nOTELCOL_GPU_INSPECTOR_PLUGIN="+plugin+"\n"), 0o644))

	t.Run("FullEnvironment", func(t *testing.T) {
		got := exports(t, runScript(t, "prolog.sh", map[string]string{
			"SLURM_JOB_ID": "4242", "SLURM_PROCID": "3", "OTELCOL_GPU_SLURM_CONF": conf,
		}))
		assert.Equal(t, map[string]string{
			"TRAINING_JOB_ID":                                  "4242",
			"OTEL_RESOURCE_ATTRIBUTES":                         "training.job.id=4242",
			"OTEL_EXPORTER_OTLP_ENDPOINT":                      "http://127.0.0.1:4318",
			"TORCH_NCCL_TRACE_BUFFER_SIZE":                     "2000",
			"TORCH_NCCL_ENABLE_TIMING":                         "1",
			"TORCH_NCCL_DUMP_ON_TIMEOUT":                       "1",
			"TORCH_NCCL_DEBUG_INFO_TEMP_FILE":                  dir + "/fr/4242/0/nccl_trace_rank_",
			"TORCH_FR_DUMP_TEMP_FILE":                          dir + "/fr/4242/0/nccl_trace_rank_",
			"NCCL_PROFILER_PLUGIN":                             plugin,
			"NCCL_INSPECTOR_ENABLE":                            "1",
			"NCCL_INSPECTOR_DUMP_DIR":                          dir + "/insp",
			"NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS": "1000000",
		}, got)
		fi, err := os.Stat(filepath.Join(dir, "fr", "4242", "0"))
		require.NoError(t, err, "the prolog makes the job's dump directory: PyTorch does not")
		assert.True(t, fi.IsDir())
	})
	// Two jobs on one node, and a job's restart, each get a directory of
	// their own: the agent's flight_recorder::job_path ({job}/{attempt}).
	t.Run("PerJobPerAttemptDirectory", func(t *testing.T) {
		for _, c := range []struct{ job, restarts, want string }{
			{"4243", "", "/fr/4243/0/"}, {"4243", "2", "/fr/4243/2/"}, {"4244", "0", "/fr/4244/0/"},
			{"4245", "x; rm -rf /", "/fr/4245/0/"}, // not a count: attempt 0
		} {
			env := map[string]string{"SLURM_JOB_ID": c.job, "OTELCOL_GPU_SLURM_CONF": conf}
			if c.restarts != "" {
				env["SLURM_RESTART_COUNT"] = c.restarts
			}
			got := exports(t, runScript(t, "prolog.sh", env))
			assert.Equal(t, dir+c.want+"nccl_trace_rank_", got["TORCH_FR_DUMP_TEMP_FILE"], c)
			assert.DirExists(t, dir+c.want)
		}
	})
	// A job directory that is a symlink (someone squatting the next job's
	// id) is not used: dumps go to the shared directory, and nothing is
	// created where the link points.
	t.Run("SquattedJobDirectory", func(t *testing.T) {
		elsewhere := t.TempDir()
		require.NoError(t, os.Symlink(elsewhere, filepath.Join(dir, "fr", "4246")))
		got := exports(t, runScript(t, "prolog.sh", map[string]string{"SLURM_JOB_ID": "4246", "OTELCOL_GPU_SLURM_CONF": conf}))
		assert.Equal(t, dir+"/fr/nccl_trace_rank_", got["TORCH_FR_DUMP_TEMP_FILE"])
		entries, err := os.ReadDir(elsewhere)
		require.NoError(t, err)
		assert.Empty(t, entries, "nothing made through the link")
	})
	t.Run("JobIDNotAPlainName", func(t *testing.T) {
		got := exports(t, runScript(t, "prolog.sh", map[string]string{"SLURM_JOB_ID": "../../etc", "OTELCOL_GPU_SLURM_CONF": conf}))
		assert.Equal(t, dir+"/fr/nccl_trace_rank_", got["TORCH_FR_DUMP_TEMP_FILE"])
	})
	t.Run("DefaultsWithoutSiteConfig", func(t *testing.T) {
		got := exports(t, runScript(t, "prolog.sh", map[string]string{
			"SLURM_JOB_ID": "7", "OTELCOL_GPU_SLURM_CONF": filepath.Join(dir, "missing"),
			"OTELCOL_GPU_INSPECTOR_PLUGIN": filepath.Join(dir, "not-installed.so"),
		}))
		assert.Regexp(t, `^/var/run/torch-fr/(7/0/)?nccl_trace_rank_$`, got["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"],
			"the per-job directory where /var/run/torch-fr exists on this machine")
		assert.NotContains(t, got, "NCCL_PROFILER_PLUGIN", "no plugin installed: no inspector")
		assert.NotContains(t, got, "NCCL_INSPECTOR_ENABLE")
	})
	t.Run("JobSettingsWin", func(t *testing.T) {
		got := exports(t, runScript(t, "prolog.sh", map[string]string{
			"SLURM_JOB_ID": "7", "OTELCOL_GPU_SLURM_CONF": conf,
			"TORCH_NCCL_TRACE_BUFFER_SIZE": "20000",
			"OTEL_EXPORTER_OTLP_ENDPOINT":  "http://10.0.0.1:4318",
			"OTEL_RESOURCE_ATTRIBUTES":     "team=llm",
		}))
		assert.NotContains(t, got, "TORCH_NCCL_TRACE_BUFFER_SIZE")
		assert.NotContains(t, got, "OTEL_EXPORTER_OTLP_ENDPOINT")
		assert.Equal(t, "team=llm,training.job.id=7", got["OTEL_RESOURCE_ATTRIBUTES"])
		assert.Equal(t, "7", got["TRAINING_JOB_ID"])
	})
	t.Run("JobIDAlreadyAttributed", func(t *testing.T) {
		got := exports(t, runScript(t, "prolog.sh", map[string]string{
			"SLURM_JOB_ID": "7", "OTELCOL_GPU_SLURM_CONF": conf,
			"OTEL_RESOURCE_ATTRIBUTES": "training.job.id=llama-70b,team=llm",
		}))
		assert.NotContains(t, got, "OTEL_RESOURCE_ATTRIBUTES")
	})
	t.Run("NotASlurmTask", func(t *testing.T) {
		assert.Empty(t, runScript(t, "prolog.sh", map[string]string{"OTELCOL_GPU_SLURM_CONF": conf}))
	})
}

// TestEpilog: the finished job's files that stopped changing are removed
// when the agent is healthy; everything stays when it is not.
func TestEpilog(t *testing.T) {
	healthy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	defer healthy.Close()
	sick := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer sick.Close()

	setup := func(t *testing.T) (fr, insp string, files map[string]bool) {
		dir := t.TempDir()
		fr, insp = filepath.Join(dir, "fr"), filepath.Join(dir, "insp")
		require.NoError(t, os.Mkdir(fr, 0o755))
		require.NoError(t, os.Mkdir(insp, 0o755))
		hourAgo := time.Now().Add(-time.Hour)
		// path -> read by the agent long ago (true) or still being written.
		files = map[string]bool{
			filepath.Join(fr, "node1_nccl_trace_rank_0"):     true,
			filepath.Join(fr, "nccl_trace_rank_1"):           true,
			filepath.Join(fr, "node1_nccl_trace_rank_2"):     false,
			filepath.Join(insp, "node1-pid1234.log"):         true,
			filepath.Join(fr, "unrelated.txt"):               true,
			filepath.Join(fr, "node1_nccl_trace_rank_3.tmp"): true,
		}
		for path, old := range files {
			require.NoError(t, os.WriteFile(path, []byte("x"), 0o644))
			if old {
				require.NoError(t, os.Chtimes(path, hourAgo, hourAgo))
			}
		}
		return fr, insp, files
	}
	env := func(fr, insp, healthURL string) map[string]string {
		return map[string]string{
			"SLURM_JOB_ID": "4242", "SLURM_JOB_UID": strconv.Itoa(os.Getuid()),
			"OTELCOL_GPU_SLURM_CONF": "/nonexistent", "OTELCOL_GPU_FR_DIR": fr, "OTELCOL_GPU_INSPECTOR_DIR": insp,
			"OTELCOL_GPU_HEALTH_URL": healthURL, "OTELCOL_GPU_EPILOG_MAX_WAIT": "0",
		}
	}
	exists := func(path string) bool { _, err := os.Stat(path); return err == nil }

	t.Run("AgentHealthy", func(t *testing.T) {
		fr, insp, files := setup(t)
		runScript(t, "epilog.sh", env(fr, insp, healthy.URL))
		for path, old := range files {
			base := filepath.Base(path)
			ours := strings.Contains(base, "nccl_trace_rank_") || strings.Contains(base, "-pid")
			removable := old && ours
			assert.Equal(t, !removable, exists(path), "%s (read long ago: %v)", base, old)
		}
		assert.False(t, exists(filepath.Join(fr, "node1_nccl_trace_rank_0")))
		assert.True(t, exists(filepath.Join(fr, "node1_nccl_trace_rank_2")), "still changing: left")
		assert.True(t, exists(filepath.Join(fr, "unrelated.txt")))
	})
	// The job's own directory (the prolog's <fr>/<job>/<attempt>/): its read
	// dumps go, then its emptied directories; another job's stay.
	t.Run("JobDirectory", func(t *testing.T) {
		fr, insp, _ := setup(t)
		hourAgo := time.Now().Add(-time.Hour)
		write := func(rel string, old bool) string {
			path := filepath.Join(fr, rel)
			require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
			require.NoError(t, os.WriteFile(path, []byte("x"), 0o644))
			if old {
				require.NoError(t, os.Chtimes(path, hourAgo, hourAgo))
			}
			return path
		}
		read0 := write("4242/0/nccl_trace_rank_0", true)
		changing := write("4242/1/nccl_trace_rank_1", false)
		other := write("4243/0/nccl_trace_rank_0", true)
		runScript(t, "epilog.sh", env(fr, insp, healthy.URL))
		assert.NoFileExists(t, read0)
		assert.NoDirExists(t, filepath.Dir(read0), "an emptied attempt directory is removed")
		assert.FileExists(t, changing, "still changing: left")
		assert.FileExists(t, other, "another job's dump")
	})
	t.Run("AgentDown", func(t *testing.T) {
		fr, insp, files := setup(t)
		runScript(t, "epilog.sh", env(fr, insp, sick.URL))
		for path := range files {
			assert.True(t, exists(path), "%s removed although the agent may not have read it", path)
		}
	})
	t.Run("AnotherUsersFiles", func(t *testing.T) {
		fr, insp, files := setup(t)
		e := env(fr, insp, healthy.URL)
		e["SLURM_JOB_UID"] = strconv.Itoa(os.Getuid() + 1)
		runScript(t, "epilog.sh", e)
		for path := range files {
			assert.True(t, exists(path), "%s is not the job's user's", path)
		}
	})
	t.Run("NoJob", func(t *testing.T) {
		fr, insp, files := setup(t)
		e := env(fr, insp, healthy.URL)
		delete(e, "SLURM_JOB_UID")
		runScript(t, "epilog.sh", e)
		for path := range files {
			assert.True(t, exists(path), path)
		}
	})
}
