package ncclflightreceiver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

func TestJobPathTemplates(t *testing.T) {
	for _, ok := range []string{"", "{job}/{attempt}", "{job}", "slurm/{job}/*/{attempt}", "{attempt}/{job}"} {
		_, err := parseJobPath(ok)
		assert.NoError(t, err, ok)
	}
	for tmpl, want := range map[string]string{
		"/{job}/{attempt}":                "must be relative",
		"{job}/":                          "must be relative",
		"{attempt}":                       "must name {job} exactly once, found 0",
		"{job}/{job}":                     "must name {job} exactly once, found 2",
		"{job}/{attempt}/{attempt}":       "{attempt} at most once",
		"{job}//{attempt}":                `has the directory level ""`,
		"../{job}":                        `has the directory level ".."`,
		"./{job}":                         `has the directory level "."`,
		"job-{job}":                       `"job-{job}"; each level is exactly`,
		"{job}/att*":                      `"att*"`,
		"{job}/[0-9]":                     `"[0-9]"`,
		"{job}/\xff":                      "not valid UTF-8",
		strings.Repeat("a/", 8) + "{job}": "9 directory levels, at most 8",
	} {
		_, err := parseJobPath(tmpl)
		assert.ErrorContains(t, err, want, tmpl)
	}

	// Validate names the key and the value.
	cfg := fastConfig("/fr")
	cfg.FlightRecorder.JobPath = "{attempt}/x"
	assert.ErrorContains(t, confmap.Validate(cfg), `flight_recorder::job_path: "{attempt}/x" must name {job} exactly once`)
	assert.Equal(t, "{job}/{attempt}", createDefaultConfig().(*Config).FlightRecorder.JobPath, "the layout of the Slurm prolog")
}

// A directory name is written by whoever can write the dump directory:
// resolve refuses what cannot be a job or an attempt rather than guess.
func TestJobPathResolveHostilePaths(t *testing.T) {
	p, err := parseJobPath("{job}/{attempt}")
	require.NoError(t, err)
	ok := map[string]jobRef{
		"/fr/nccl_trace_rank_0":                    {job: "agent-job"},
		"/fr/1234/0/nccl_trace_rank_0":             {job: "1234", fromPath: true},
		"/fr/llama 70b é/12/rank_3":                {job: "llama 70b é", attempt: 12, fromPath: true},
		"/fr/" + strings.Repeat("j", 128) + "/1/x": {job: strings.Repeat("j", 128), attempt: 1, fromPath: true},
		"/fr/..../0/x":                             {job: "....", fromPath: true}, // a legal name, not a parent
	}
	for path, want := range ok {
		got, err := p.resolve("/fr", path, "agent-job")
		require.NoError(t, err, path)
		assert.Equal(t, want, got, path)
	}
	for path, want := range map[string]string{
		"/fr/1234/nccl_trace_rank_0":                   "1 directories below",
		"/fr/1234/0/extra/nccl_trace_rank_0":           "3 directories below",
		"/fr/../etc/0/x":                               "not below the watched directory", // Rel cleans it first
		"/elsewhere/1234/0/x":                          "not below the watched directory",
		"/fr/../0/x":                                   "not below",
		"/fr/" + strings.Repeat("j", 129) + "/0/x":     "129 bytes long, over 128",
		"/fr/" + strings.Repeat("j", 100_000) + "/0/x": "100000 bytes long",
		"/fr/job\xff\xfe/0/x":                          "not valid UTF-8",
		"/fr/job\x1b[31m/0/x":                          "control character",
		"/fr/job\u200b\u0085/0/x":                      "control character",
		"/fr/1234/01/x":                                "not a non-negative integer",
		"/fr/1234/-1/x":                                "not a non-negative integer",
		"/fr/1234/99999999999999999999/x":              "not a non-negative integer",
		"/fr/1234/one/x":                               "not a non-negative integer",
	} {
		_, err := p.resolve("/fr", path, "agent-job")
		require.Error(t, err, path)
		assert.ErrorContains(t, err, want, path)
		assert.Less(t, len(err.Error()), 400, "an absurd name is not quoted in full")
	}
	lit, err := parseJobPath("slurm/{job}/*/{attempt}")
	require.NoError(t, err)
	got, err := lit.resolve("/fr", "/fr/slurm/77/node-3/2/rank_1", "")
	require.NoError(t, err)
	assert.Equal(t, jobRef{job: "77", attempt: 2, fromPath: true}, got)
	_, err = lit.resolve("/fr", "/fr/k8s/77/node-3/2/rank_1", "")
	assert.ErrorContains(t, err, `directory "k8s" is not "slurm"`)
}

// copyDumpsTo puts a fixture job's pickle dumps into dir (created).
func copyDumpsTo(t *testing.T, fixture, dir string) {
	t.Helper()
	src := filepath.Join("internal", "frdump", "testdata", fixture)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	entries, err := os.ReadDir(src)
	require.NoError(t, err)
	for _, e := range entries {
		if filepath.Ext(e.Name()) == ".json" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "node7-"+e.Name()), data, 0o644))
	}
}

func resourceJob(res pcommon.Resource) (string, int64, bool) {
	job, _ := res.Attributes().Get(semconv.AttrTrainingJobID)
	attempt, ok := res.Attributes().Get(semconv.AttrTrainingAttempt)
	return job.Str(), attempt.Int(), ok
}

type jobFinding struct {
	job     string
	attempt int64
	kind    string
	ranks   []any
	key     string
}

func jobFindings(all []plog.Logs) []jobFinding {
	var out []jobFinding
	for _, ld := range all {
		for i := 0; i < ld.ResourceLogs().Len(); i++ {
			rl := ld.ResourceLogs().At(i)
			job, attempt, _ := resourceJob(rl.Resource())
			lrs := rl.ScopeLogs().At(0).LogRecords()
			for j := 0; j < lrs.Len(); j++ {
				lr := lrs.At(j)
				ranks, _ := lr.Attributes().Get(semconv.AttrNCCLRanks)
				out = append(out, jobFinding{job: job, attempt: attempt, kind: attrStr(lr, semconv.AttrNCCLFinding),
					ranks: ranks.Slice().AsRaw(), key: attrStr(lr, semconv.AttrNCCLFindingKey)})
			}
		}
	}
	return out
}

// Two jobs dumping on one node under one directory, as the Slurm prolog
// lays them out: a hang in one (rank 2 stopped), a straggler in the other
// (rank 5). Each job is analysed alone: each finding carries its own job
// and attempt, names its own culprit, and nothing of one job is in the
// other's findings, spans or metrics. The finding keys hold no local path.
func TestTwoJobsInOneTreeAnalysedApart(t *testing.T) {
	root := t.TempDir()
	copyDumpsTo(t, "dp4-hang2-v2.4", filepath.Join(root, "5001", "0"))
	copyDumpsTo(t, "dp8-straggler5-v2.10", filepath.Join(root, "5002", "3"))
	// Hostile neighbours: refused, counted, and no part of either job.
	copyDumpsTo(t, "dp4-healthy-v2.7", filepath.Join(root, "bad\xffjob", "0"))
	copyDumpsTo(t, "dp4-healthy-v2.7", filepath.Join(root, "5003"))
	cfg := fastConfig(root)
	cfg.JobID = "agent-setting"
	cfg.FlightRecorder.IncompleteAfter = 200 * time.Millisecond
	e := startReceiver(t, cfg, &memStorage{data: map[string][]byte{}})
	defer e.stop(t)

	byKind := func() map[string]jobFinding {
		m := map[string]jobFinding{}
		for _, f := range jobFindings(e.logs.AllLogs()) {
			if f.kind == semconv.NCCLFindingHang || f.kind == "straggler" {
				m[f.kind] = f
			}
		}
		return m
	}
	require.Eventually(t, func() bool { return len(byKind()) == 2 }, 20*time.Second, 10*time.Millisecond)
	got := byKind()
	hang, straggler := got[semconv.NCCLFindingHang], got["straggler"]
	assert.Equal(t, "5001", hang.job)
	assert.Equal(t, int64(0), hang.attempt)
	assert.Equal(t, []any{int64(2)}, hang.ranks)
	assert.Equal(t, "5002", straggler.job)
	assert.Equal(t, int64(3), straggler.attempt)
	assert.Equal(t, []any{int64(5)}, straggler.ranks)
	for _, f := range jobFindings(e.logs.AllLogs()) {
		assert.Contains(t, []string{"5001", "5002"}, f.job, "no finding of the refused dumps or the agent's job")
		assert.True(t, strings.HasPrefix(f.key, f.job+"|"+map[string]string{"5001": "0", "5002": "3"}[f.job]+"|"), f.key)
		assert.NotContains(t, f.key, root, "the key holds no local path")
		if f.job == "5001" {
			assert.NotContains(t, f.ranks, int64(5), "the 4-rank job has no rank 5: no cross-job analysis")
		}
	}

	// Spans: 8 × 50 of the straggler job under its job and attempt; the
	// hang job's under its own; none under the agent's setting.
	spans := map[string]int{}
	for _, td := range e.traces.AllTraces() {
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			rs := td.ResourceSpans().At(i)
			job, attempt, ok := resourceJob(rs.Resource())
			require.True(t, ok, "training.attempt on every span resource of a job directory")
			spans[job] += rs.ScopeSpans().At(0).Spans().Len()
			if job == "5002" {
				assert.Equal(t, int64(3), attempt)
			}
		}
	}
	assert.Equal(t, 8*50, spans["5002"])
	assert.NotZero(t, spans["5001"])
	assert.Len(t, spans, 2, "only the two jobs: %v", spans)

	// Metrics: one resource per (job, attempt, rank), so both jobs' rank 0.
	rank0 := func() map[string]bool {
		all := e.metrics.AllMetrics()
		out := map[string]bool{}
		if len(all) == 0 {
			return out
		}
		md := all[len(all)-1] // cumulative: the latest holds every series
		for i := 0; i < md.ResourceMetrics().Len(); i++ {
			res := md.ResourceMetrics().At(i).Resource()
			job, _, _ := resourceJob(res)
			if rank, _ := res.Attributes().Get(semconv.AttrTrainingRank); rank.Int() == 0 {
				out[job] = true
			}
		}
		return out
	}
	require.Eventually(t, func() bool { return len(rank0()) == 2 }, 20*time.Second, 10*time.Millisecond)
	assert.Equal(t, map[string]bool{"5001": true, "5002": true}, rank0())

	// The hostile neighbours were refused under their own reason.
	require.Eventually(t, func() bool {
		return e.obs.FilterMessageSnippet("name no valid job and attempt").Len() == 8
	}, 20*time.Second, 10*time.Millisecond, "4 dumps of a non-UTF-8 job and 4 at the wrong depth")
}

// Agents that mount the dump directory at different paths report a finding
// under the same key, so that the gateway drops the repeat.
func TestFindingKeyIndependentOfMountPath(t *testing.T) {
	keys := func(root string) []string {
		copyDumpsTo(t, "dp8-straggler5-v2.10", filepath.Join(root, "5002", "3"))
		e := startReceiver(t, fastConfig(root), &memStorage{data: map[string][]byte{}})
		require.Eventually(t, func() bool { return len(jobFindings(e.logs.AllLogs())) > 0 }, 20*time.Second, 10*time.Millisecond)
		e.stop(t)
		var out []string
		for _, f := range jobFindings(e.logs.AllLogs()) {
			out = append(out, f.key)
		}
		return out
	}
	a := keys(filepath.Join(t.TempDir(), "var", "run", "torch-fr"))
	b := keys(filepath.Join(t.TempDir(), "host", "mnt", "fr"))
	require.NotEmpty(t, a)
	assert.ElementsMatch(t, a, b)
}
