package sdktest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// contractIDs computes the ids of docs/training-scripts.md from the bytes the
// document names, independently of the SDK and of internal/steprecord.
func contractIDs(job string, attempt, step, rank int64) (traceID, rankSpanID, rootSpanID string) {
	sum := func(s string, n int) string {
		h := sha256.Sum256([]byte(s))
		return hex.EncodeToString(h[:n])
	}
	prefix := job + "\x00" + strconv.FormatInt(attempt, 10) + "\x00" + strconv.FormatInt(step, 10)
	return sum(prefix, 16), sum(prefix+"\x00"+strconv.FormatInt(rank, 10), 8), sum(prefix+"\x00root", 8)
}

// fakeAgent stands in for the agent's OTLP/HTTP receiver: it decodes every
// request with pdata's JSON unmarshalers, so what it keeps is valid OTLP.
type fakeAgent struct {
	srv     *httptest.Server
	release chan struct{} // when hanging: closed at the end of the test

	mu       sync.Mutex
	traces   []ptrace.Traces
	logs     []plog.Logs
	problems []string
	requests int
}

func startAgent(t *testing.T) *fakeAgent {
	return newAgent(t, false)
}

// startHungAgent accepts requests and never answers them.
func startHungAgent(t *testing.T) *fakeAgent {
	return newAgent(t, true)
}

func newAgent(t *testing.T, hang bool) *fakeAgent {
	t.Helper()
	a := &fakeAgent{release: make(chan struct{})}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		a.mu.Lock()
		a.requests++
		a.mu.Unlock()
		if hang {
			<-a.release
			return
		}
		if err != nil {
			a.problem("reading body: " + err.Error())
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
			a.problem("unexpected " + r.Method + " with Content-Type " + r.Header.Get("Content-Type"))
		}
		switch r.URL.Path {
		case "/v1/traces":
			td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(body)
			if err != nil {
				a.problem("decoding traces: " + err.Error())
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			a.mu.Lock()
			a.traces = append(a.traces, td)
			a.mu.Unlock()
		case "/v1/logs":
			ld, err := (&plog.JSONUnmarshaler{}).UnmarshalLogs(body)
			if err != nil {
				a.problem("decoding logs: " + err.Error())
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			a.mu.Lock()
			a.logs = append(a.logs, ld)
			a.mu.Unlock()
		default:
			a.problem("unexpected path " + r.URL.Path)
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{}`))
	}))
	t.Cleanup(func() {
		close(a.release)
		a.srv.Close()
	})
	return a
}

func (a *fakeAgent) problem(s string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.problems = append(a.problems, s)
}

// checkNoProblems fails the test for any request the agent could not take.
func (a *fakeAgent) checkNoProblems(t *testing.T) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range a.problems {
		t.Errorf("agent: %s", p)
	}
}

// receivedSpan is one span with the resource it came with.
type receivedSpan struct {
	resource pcommon.Map
	span     ptrace.Span
}

func (a *fakeAgent) spans() []receivedSpan {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []receivedSpan
	for _, td := range a.traces {
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			rs := td.ResourceSpans().At(i)
			for j := 0; j < rs.ScopeSpans().Len(); j++ {
				ss := rs.ScopeSpans().At(j)
				for k := 0; k < ss.Spans().Len(); k++ {
					out = append(out, receivedSpan{resource: rs.Resource().Attributes(), span: ss.Spans().At(k)})
				}
			}
		}
	}
	return out
}

type receivedLog struct {
	resource pcommon.Map
	record   plog.LogRecord
}

func (a *fakeAgent) logRecords() []receivedLog {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []receivedLog
	for _, ld := range a.logs {
		for i := 0; i < ld.ResourceLogs().Len(); i++ {
			rl := ld.ResourceLogs().At(i)
			for j := 0; j < rl.ScopeLogs().Len(); j++ {
				sl := rl.ScopeLogs().At(j)
				for k := 0; k < sl.LogRecords().Len(); k++ {
					out = append(out, receivedLog{resource: rl.Resource().Attributes(), record: sl.LogRecords().At(k)})
				}
			}
		}
	}
	return out
}

// closedEndpoint is an address where nothing listens: an agent that is down.
func closedEndpoint(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatalf("close listener: %v", err)
	}
	return "http://" + addr
}

// trainingScript is a training loop using the SDK, driven by a JSON
// configuration in argv[1]; it prints what the SDK counted as JSON.
const trainingScript = `
import json, os, sys, time, types
cfg = json.loads(sys.argv[1])

if cfg.get("fake_torch"):
    # A stand-in for torch, so the CUDA-event path and the flight-recorder
    # dump run without a GPU. Its events complete on the third query.
    class Event(object):
        def __init__(self, enable_timing=False):
            self.queries = 0
        def record(self):
            pass
        def query(self):
            self.queries += 1
            return self.queries >= 3
        def elapsed_time(self, end):
            return 12.5
    torch = types.ModuleType("torch")
    torch.cuda = types.SimpleNamespace(
        is_available=lambda: bool(cfg.get("fake_cuda")),
        Event=Event,
        current_device=lambda: 0,
        get_device_properties=lambda i: types.SimpleNamespace(uuid="58d0ef2e-1c2b-4f3a-9d8e-7a6b5c4d3e2f"),
    )
    torch._C = types.SimpleNamespace(_distributed_c10d=types.SimpleNamespace(
        _dump_nccl_trace=lambda includeCollectives=True, includeStackTraces=True, onlyActive=False: b"\x80\x02fake flight recorder"))
    sys.modules["torch"] = torch
else:
    sys.modules["torch"] = None  # a real torch, if installed, stays out: the CPU path

import otelcol_gpu_step

steps = otelcol_gpu_step.Steps(**cfg.get("kwargs", {}))
start = time.monotonic()
for n in range(cfg["first"], cfg["first"] + cfg["count"]):
    try:
        with steps.step(n):
            for phase in ("dataload", "forward", "backward", "optimizer"):
                with steps.phase(phase):
                    time.sleep(0.0002)
            steps.record(tokens=4096, loss=float("nan") if n == cfg.get("nan_step") else 2.5 + n, flops=1.5e15)
            if n == cfg.get("raise_step"):
                raise RuntimeError("CUDA error: an illegal memory access was encountered")
    except RuntimeError:
        pass
loop_s = time.monotonic() - start
start = time.monotonic()
steps.close()
close_s = time.monotonic() - start
print(json.dumps({"sent": steps.sent, "dropped": steps.dropped, "dumps": steps.dumps, "enabled": steps.enabled,
                  "loop_s": loop_s, "close_s": close_s, "host": steps.host_name, "pid": os.getpid()}))
`

// scriptConfig is argv[1] of trainingScript.
type scriptConfig struct {
	First      int            `json:"first"`
	Count      int            `json:"count"`
	NaNStep    int            `json:"nan_step,omitempty"`
	RaiseStep  int            `json:"raise_step,omitempty"`
	FakeTorch  bool           `json:"fake_torch,omitempty"`
	FakeCUDA   bool           `json:"fake_cuda,omitempty"`
	StepsKwarg map[string]any `json:"kwargs"`
}

// scriptResult is what trainingScript prints.
type scriptResult struct {
	Sent    int     `json:"sent"`
	Dropped int     `json:"dropped"`
	Dumps   int     `json:"dumps"`
	Enabled bool    `json:"enabled"`
	LoopS   float64 `json:"loop_s"`
	CloseS  float64 `json:"close_s"`
	Host    string  `json:"host"`
	PID     int64   `json:"pid"`
}

// environmentOfTheJob lists the variables the SDK reads; the test's own
// environment must not leak them into the scripts.
var environmentOfTheJob = []string{
	"TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT", "SLURM_JOB_ID", "SLURM_RESTART_COUNT",
	"SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS", "RANK", "LOCAL_RANK", "WORLD_SIZE",
	"OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_EXPORTER_OTLP_ENDPOINT",
	"CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "K8S_POD_UID", "POD_UID",
	"TORCH_NCCL_DEBUG_INFO_TEMP_FILE", "PYTHONPATH",
}

// requirePython3 stops the test at once, failed, where there is no python3:
// the tests must never pass without running the module.
func requirePython3(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatalf("python3 is required to test sdk/python/otelcol_gpu_step.py and was not found on PATH: %v", err)
	}
}

// runScript runs trainingScript with the module on PYTHONPATH and env added.
// It may run on a goroutine of its own, so it reports with Errorf only.
func runScript(t *testing.T, cfg scriptConfig, env map[string]string) scriptResult {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Errorf("python3 is required to test sdk/python/otelcol_gpu_step.py and was not found on PATH: %v", err)
		return scriptResult{}
	}
	sdkDir, err := filepath.Abs("..")
	if err != nil {
		t.Errorf("locating sdk/python: %v", err)
		return scriptResult{}
	}
	arg, err := json.Marshal(cfg)
	if err != nil {
		t.Errorf("encoding script config: %v", err)
		return scriptResult{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-c", trainingScript, string(arg))
	cmd.Env = append(cleanEnvironment(), "PYTHONPATH="+sdkDir, "PYTHONDONTWRITEBYTECODE=1")
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Errorf("python3 training script: %v\nstderr:\n%s", err, stderr.String())
		return scriptResult{}
	}
	var res scriptResult
	if err := json.Unmarshal([]byte(strings.TrimSpace(stdout.String())), &res); err != nil {
		t.Errorf("decoding the script's report %q: %v\nstderr:\n%s", stdout.String(), err, stderr.String())
	}
	return res
}

func cleanEnvironment() []string {
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		keep := true
		for _, drop := range environmentOfTheJob {
			if name == drop {
				keep = false
				break
			}
		}
		if keep {
			out = append(out, kv)
		}
	}
	return out
}

// Typed attribute checks: a missing attribute or a wrong type is an error.

func intAttr(t *testing.T, m pcommon.Map, key string) int64 {
	t.Helper()
	v, ok := m.Get(key)
	if !ok || v.Type() != pcommon.ValueTypeInt {
		t.Errorf("attribute %s: want an int, got %v", key, describe(v, ok))
		return 0
	}
	return v.Int()
}

func doubleAttr(t *testing.T, m pcommon.Map, key string) float64 {
	t.Helper()
	v, ok := m.Get(key)
	if !ok || v.Type() != pcommon.ValueTypeDouble {
		t.Errorf("attribute %s: want a double, got %v", key, describe(v, ok))
		return 0
	}
	return v.Double()
}

func strAttr(t *testing.T, m pcommon.Map, key string) string {
	t.Helper()
	v, ok := m.Get(key)
	if !ok || v.Type() != pcommon.ValueTypeStr {
		t.Errorf("attribute %s: want a string, got %v", key, describe(v, ok))
		return ""
	}
	return v.Str()
}

func describe(v pcommon.Value, ok bool) string {
	if !ok {
		return "nothing"
	}
	return v.Type().String() + " " + v.AsString()
}
