package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-gpu/otelcol-gpu/test/testbed"
)

func stepRecord(host string, rank, step int, loss float64) testbed.StepRecord {
	start := time.Unix(1_790_000_000, int64(step)*1e9)
	return testbed.StepRecord{
		JobID: "sim-demo-1", Rank: rank, LocalRank: rank % 8, WorldSize: 16, Host: host,
		GPUUUID: "GPU-00000000-0000-0000-0000-00000000000" + string(rune('0'+rank%8)), PPStage: rank / 8, HasPPStage: true,
		Step: step, Start: start, End: start.Add(900 * time.Millisecond), Loss: loss,
		Phases:     []testbed.PhaseTime{{Name: "dataload", Duration: 20 * time.Millisecond}, {Name: "forward", Duration: 250 * time.Millisecond}},
		Attributes: []testbed.IntAttribute{{Key: "nccl.collectives.count", Value: 4}},
	}
}

// A record is one JSON line replay reads: every field, the loss NaN as a
// string (JSON has no NaN), the phases by contract name.
func TestReplayLine(t *testing.T) {
	line, err := appendReplayLine(nil, ptrOf(stepRecord("demo-n1", 9, 3, math.NaN())), "http://127.0.0.1:4318")
	require.NoError(t, err)
	require.True(t, strings.HasSuffix(string(line), "}\n"))
	var got map[string]any
	require.NoError(t, json.Unmarshal(line, &got))
	assert.Equal(t, map[string]any{
		"job_id": "sim-demo-1", "attempt": 0.0, "rank": 9.0, "local_rank": 1.0, "world_size": 16.0,
		"host": "demo-n1", "gpu_uuid": "GPU-00000000-0000-0000-0000-000000000001", "pp_stage": 1.0,
		"service_name": "train", "endpoint": "http://127.0.0.1:4318", "step": 3.0,
		"start_ns": float64(time.Unix(1_790_000_003, 0).UnixNano()), "end_ns": float64(time.Unix(1_790_000_003, 9e8).UnixNano()),
		"phases_ns": map[string]any{"dataload": 2e7, "forward": 2.5e8}, "loss": "NaN",
		"attributes": map[string]any{"nccl.collectives.count": 4.0},
	}, got)
}

func ptrOf[T any](v T) *T { return &v }

// The records of two nodes go through two replay processes of the real
// module to each node's agent; the summary accounts for all of them.
func TestPythonStepsThroughTheModule(t *testing.T) {
	python, err := exec.LookPath("python3")
	require.NoError(t, err, "the demo sends its steps through python3")
	type got struct{ host, job string }
	var mu sync.Mutex
	spans := map[string][]got{} // agent -> spans
	agent := func(name string) *httptest.Server {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, err := io.ReadAll(r.Body)
			td, err2 := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(body)
			if !assert.NoError(t, errors.Join(err, err2)) || !assert.Equal(t, "/v1/traces", r.URL.Path) {
				http.Error(w, "bad request", http.StatusBadRequest)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for i := 0; i < td.ResourceSpans().Len(); i++ {
				rs := td.ResourceSpans().At(i)
				res := rs.Resource().Attributes().AsRaw()
				for j := 0; j < rs.ScopeSpans().At(0).Spans().Len(); j++ {
					spans[name] = append(spans[name], got{res["host.name"].(string), res["training.job.id"].(string)})
				}
			}
			_, _ = w.Write([]byte("{}"))
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	a0, a1 := agent("a0"), agent("a1")
	var ps procs
	defer ps.stopAll(5 * time.Second)
	logDir := t.TempDir()
	steps, err := startPythonSteps(&ps, logDir, python, filepath.Join("..", "..", "sdk", "python", "otelcol_gpu_step.py"),
		map[string]string{"demo-n0": a0.URL, "demo-n1": a1.URL}, []string{"demo-n0", "demo-n1"})
	require.NoError(t, err)
	for step := 0; step < 3; step++ {
		for n, host := range []string{"demo-n0", "demo-n1"} {
			var recs []testbed.StepRecord
			for g := 0; g < 8; g++ {
				recs = append(recs, stepRecord(host, n*8+g, step, 2.5))
			}
			require.NoError(t, steps.send(context.Background(), host, recs))
		}
	}
	require.Error(t, steps.send(context.Background(), "demo-n9", nil), "a node without a replay")
	sum, written, err := steps.finish(30 * time.Second)
	require.NoError(t, err)
	assert.Equal(t, replaySummary{Records: 48, Sent: 48}, sum)
	assert.Equal(t, 48, written)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, spans["a0"], 24)
	require.Len(t, spans["a1"], 24)
	for agent, host := range map[string]string{"a0": "demo-n0", "a1": "demo-n1"} {
		for _, s := range spans[agent] {
			assert.Equal(t, got{host, "sim-demo-1"}, s, agent)
		}
	}
	assert.FileExists(t, filepath.Join(logDir, "python-demo-n0.log"))
	assert.Nil(t, ps.exited(), "replays that finished are not failures")
}

// A replay that exits early is an error that names it, with its log.
func TestPythonStepsReplayDiesEarly(t *testing.T) {
	python, err := exec.LookPath("python3")
	require.NoError(t, err)
	var ps procs
	defer ps.stopAll(5 * time.Second)
	// A "module" that exits at once: what a broken interpreter or SDK does.
	sdk := filepath.Join(t.TempDir(), "broken.py")
	require.NoError(t, writeFile(sdk, "import sys\nsys.stderr.write('broken on purpose\\n')\nsys.exit(3)\n"))
	steps, err := startPythonSteps(&ps, t.TempDir(), python, sdk, map[string]string{"demo-n0": "http://127.0.0.1:1"}, []string{"demo-n0"})
	require.NoError(t, err)
	<-steps.byHost["demo-n0"].proc.Done()
	assert.Equal(t, steps.byHost["demo-n0"].proc, ps.exited(), "the run's watcher sees it")
	err = steps.send(context.Background(), "demo-n0", []testbed.StepRecord{stepRecord("demo-n0", 0, 0, 1)})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "python-demo-n0")
	_, _, err = steps.finish(5 * time.Second)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "broken on purpose")
}

func writeFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o600) }

// Without the interpreter the demo stops before starting anything, naming
// it: it never falls back to the simulator's own sender.
func TestMissingPythonIsAnError(t *testing.T) {
	c := config{out: t.TempDir(), nodes: 2, step: time.Second, python: "no-such-python3-here",
		sdk: filepath.Join("..", "..", "sdk", "python", "otelcol_gpu_step.py")}
	_, err := newDemo(c, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "-python no-such-python3-here")
	c.python, c.sdk = "python3", filepath.Join(t.TempDir(), "missing.py")
	_, err = newDemo(c, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "missing.py")
}
