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
			"TORCH_NCCL_DEBUG_INFO_TEMP_FILE":                  dir + "/fr/nccl_trace_rank_",
			"NCCL_PROFILER_PLUGIN":                             plugin,
			"NCCL_INSPECTOR_ENABLE":                            "1",
			"NCCL_INSPECTOR_DUMP_DIR":                          dir + "/insp",
			"NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS": "1000000",
		}, got)
	})
	t.Run("DefaultsWithoutSiteConfig", func(t *testing.T) {
		got := exports(t, runScript(t, "prolog.sh", map[string]string{
			"SLURM_JOB_ID": "7", "OTELCOL_GPU_SLURM_CONF": filepath.Join(dir, "missing"),
			"OTELCOL_GPU_INSPECTOR_PLUGIN": filepath.Join(dir, "not-installed.so"),
		}))
		assert.Equal(t, "/var/run/torch-fr/nccl_trace_rank_", got["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"])
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
