package sdktest

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-gpu/otelcol-gpu/internal/steprecord"
)

// recordStepScript sends step 0 of rank 0 through step()/phase()/record()
// and steps 0 and 1 of rank 1 through record_step() (step 1 from inside an
// open step of rank 1's own object), then hands record_step() bad input.
const recordStepScript = `
import json, sys, time
sys.modules["torch"] = None
import otelcol_gpu_step
cfg = json.loads(sys.argv[1])
kw = dict(job_id=cfg["job"], world_size=2, flush_interval=0.05, endpoint=cfg["endpoint"], register_atexit=False)

measured = otelcol_gpu_step.Steps(rank=0, **kw)
with measured.step(0):
    for phase in ("dataload", "forward", "backward", "optimizer"):
        with measured.phase(phase):
            time.sleep(0.0002)
    measured.record(tokens=4096, loss=2.5, flops=1.5e15, attributes={"nccl.collectives.count": 4})
measured.close()

timed = otelcol_gpu_step.Steps(rank=1, host_name=cfg["host"], gpu_uuid=cfg["gpu"], **kw)
phases = {"dataload": 20000000, "forward": 250000000, "backward": 500000000, "optimizer": 40000000}
t0 = cfg["start_ns"]
timed.record_step(0, t0, t0 + 812345678, phases_ns=phases, tokens=4096, loss=2.5, flops=1.5e15,
                  attributes={"nccl.collectives.count": 4})
with timed.step(7):  # allowed: the open step is not touched
    timed.record_step(1, t0 + 1000000000, t0 + 1900000000, phases_ns=phases, loss=float("nan"),
                      error="RuntimeError")
bad = [
    dict(n=2, start_ns=t0, end_ns=t0 - 1),                       # ends before it starts
    dict(n=2.5, start_ns=t0, end_ns=t0),                         # not an int step
    dict(n=True, start_ns=t0, end_ns=t0),                        # a bool is no step
    dict(n=2, start_ns=float(t0), end_ns=t0),                    # not an int time
    dict(n=2, start_ns=t0, end_ns=t0, phases_ns={"Forward": 1}), # bad phase name
    dict(n=2, start_ns=t0, end_ns=t0, phases_ns={"forward": -1}),# negative
    dict(n=2, start_ns=t0, end_ns=t0, phases_ns=["forward"]),    # not a dict
]
for args in bad:
    timed.record_step(**args)
timed.close()
print(json.dumps({"measured": [measured.sent, measured.dropped], "timed": [timed.sent, timed.dropped],
                  "host": measured.host_name, "timed_host": timed.host_name}))
`

// record_step() sends what step() sends: the same span, attribute names and
// types, the contract's ids, and the times and phases exactly as given. Bad
// input is counted as dropped, never raised.
func TestRecordStepSendsWhatStepSends(t *testing.T) {
	requirePython3(t)
	const (
		job     = "llama-test-record-step"
		host    = "sim-node-7"
		gpu     = "GPU-11111111-2222-3333-4444-555555555555"
		startNS = int64(1_790_000_000_123_456_789)
	)
	agent := startAgent(t)
	arg, err := json.Marshal(map[string]any{"job": job, "endpoint": agent.srv.URL, "host": host, "gpu": gpu, "start_ns": startNS})
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err := runPython(t, nil, "-c", recordStepScript, string(arg))
	if err != nil {
		t.Fatalf("python3: %v\nstderr:\n%s", err, stderr)
	}
	var res struct {
		Measured, Timed [2]int
		TimedHost       string `json:"timed_host"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(stdout)), &res); err != nil {
		t.Fatalf("decoding %q: %v\nstderr:\n%s", stdout, err, stderr)
	}
	if res.Measured != [2]int{1, 0} || res.Timed != [2]int{3, 7} {
		t.Errorf("sent/dropped: first object %v, second %v; want [1 0] and [3 7] (steps 0, 1 and 7 sent, 7 bad records dropped)", res.Measured, res.Timed)
	}
	if res.TimedHost != host {
		t.Errorf("host_name %q, want %q", res.TimedHost, host)
	}
	if !strings.Contains(stderr, "invalid record_step()") {
		t.Errorf("no warning about the bad records on stderr:\n%s", stderr)
	}
	agent.checkNoProblems(t)

	byRankStep := map[string]receivedSpan{}
	for _, rs := range agent.spans() {
		key := fmt.Sprintf("%d/%d", intAttr(t, rs.resource, "training.rank"), intAttr(t, rs.span.Attributes(), "iteration.step"))
		byRankStep[key] = rs
	}
	if _, open := byRankStep["1/7"]; len(byRankStep) != 4 || !open {
		t.Fatalf("got spans %v, want rank 0 step 0 and rank 1 steps 0, 1 and 7 (the open step)", keys(byRankStep))
	}
	measured, timed, failed := byRankStep["0/0"], byRankStep["1/0"], byRankStep["1/1"]

	// The same names and value types, resource and span, as step() sends.
	if got, want := shape(timed.span.Attributes()), shape(measured.span.Attributes()); got != want {
		t.Errorf("record_step() span attributes\n  %s\nstep() span attributes\n  %s", got, want)
	}
	wantRes := shape(measured.resource)
	if got := shape(timed.resource); got != wantRes+" gpu.uuid:Str" && got != insertSorted(wantRes, "gpu.uuid:Str") {
		t.Errorf("record_step() resource\n  %s\nstep() resource (plus gpu.uuid)\n  %s", got, wantRes)
	}
	if timed.span.Name() != measured.span.Name() || timed.span.Kind() != measured.span.Kind() {
		t.Errorf("record_step() span %q kind %v, step() span %q kind %v", timed.span.Name(), timed.span.Kind(), measured.span.Name(), measured.span.Kind())
	}

	for step, rs := range map[int64]receivedSpan{0: timed, 1: failed} {
		checkIdentity(t, fmt.Sprintf("step %d", step), rs.span.Attributes(), rs.resource,
			steprecord.Identity{Job: job, Step: step, Rank: 1})
		traceID, spanID, rootID := contractIDs(job, 0, step, 1)
		if rs.span.TraceID().String() != traceID || rs.span.SpanID().String() != spanID || rs.span.ParentSpanID().String() != rootID {
			t.Errorf("step %d: ids %s/%s/%s, want %s/%s/%s", step, rs.span.TraceID(), rs.span.SpanID(), rs.span.ParentSpanID(), traceID, spanID, rootID)
		}
		if v := strAttr(t, rs.resource, "host.name"); v != host {
			t.Errorf("step %d: host.name %q, want %q", step, v, host)
		}
		if v := strAttr(t, rs.resource, "gpu.uuid"); v != gpu {
			t.Errorf("step %d: gpu.uuid %q, want %q", step, v, gpu)
		}
		for name, want := range map[string]int64{
			"training.phase.dataload_ns": 20_000_000, "training.phase.forward_ns": 250_000_000,
			"training.phase.backward_ns": 500_000_000, "training.phase.optimizer_ns": 40_000_000,
		} {
			if v := intAttr(t, rs.span.Attributes(), name); v != want {
				t.Errorf("step %d: %s = %d, want %d", step, name, v, want)
			}
		}
	}
	if got, want := timed.span.StartTimestamp(), pcommon.Timestamp(startNS); got != want {
		t.Errorf("start %d, want %d exactly", got, want)
	}
	if got, want := timed.span.EndTimestamp(), pcommon.Timestamp(startNS+812_345_678); got != want {
		t.Errorf("end %d, want %d exactly", got, want)
	}
	if timed.span.Status().Code() != ptrace.StatusCodeUnset {
		t.Errorf("step 0: status %v, want unset", timed.span.Status().Code())
	}
	if failed.span.Status().Code() != ptrace.StatusCodeError || strAttr(t, failed.span.Attributes(), "error.type") != "RuntimeError" {
		t.Errorf("step 1: status %v, want Error with error.type RuntimeError", failed.span.Status().Code())
	}
	if v := doubleAttr(t, failed.span.Attributes(), "training.loss"); !math.IsNaN(v) {
		t.Errorf("step 1: training.loss = %v, want NaN", v)
	}
	if got, want := failed.span.EndTimestamp()-failed.span.StartTimestamp(), pcommon.Timestamp(900_000_000); got != want {
		t.Errorf("step 1 lasted %d ns, want %d", got, want)
	}
}

// replay sends every valid line of stdin through record_step(), one Steps
// per rank, counts the lines that are not records and prints one summary.
func TestReplay(t *testing.T) {
	requirePython3(t)
	const job = "llama-test-replay"
	agent := startAgent(t)
	base := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC).UnixNano()
	var lines []string
	for step := 0; step < 3; step++ {
		for rank := 0; rank < 2; rank++ {
			rec := map[string]any{
				"job_id": job, "attempt": 1, "rank": rank, "local_rank": rank, "world_size": 2,
				"host": fmt.Sprintf("replay-n%d", rank), "gpu_uuid": fmt.Sprintf("GPU-0000000%d-0000-0000-0000-000000000000", rank),
				"pp_stage": rank, "service_name": "train", "endpoint": agent.srv.URL, "step": step,
				"start_ns": base + int64(step)*1e9, "end_ns": base + int64(step)*1e9 + 800e6,
				"phases_ns": map[string]int64{"dataload": 1e6, "forward": 2e6, "backward": 3e6, "optimizer": 4e6},
				"loss":      2.5, "attributes": map[string]any{"nccl.collectives.count": 4},
			}
			if step == 2 {
				rec["loss"] = "NaN"
			}
			line, err := json.Marshal(rec)
			if err != nil {
				t.Fatal(err)
			}
			lines = append(lines, string(line))
		}
		if step == 0 {
			lines = append(lines, "this is not JSON", `{"job_id": "x", "rank": 0}`, "")
		}
	}
	stdin := strings.Join(lines, "\n") + "\n"
	stdout, stderr, err := runPython(t, strings.NewReader(stdin), filepath.Join("..", "otelcol_gpu_step.py"), "replay", "--flush-interval", "0.05")
	if err != nil {
		t.Fatalf("replay: %v\nstderr:\n%s", err, stderr)
	}
	var summary map[string]int
	if err := json.Unmarshal([]byte(strings.TrimSpace(stdout)), &summary); err != nil {
		t.Fatalf("the summary %q is not one JSON line: %v", stdout, err)
	}
	if want := map[string]int{"records": 6, "sent": 6, "dropped": 0, "invalid": 2}; fmt.Sprint(summary) != fmt.Sprint(want) {
		t.Errorf("summary %v, want %v", summary, want)
	}
	for _, want := range []string{"line 3:", "line 4:"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not report %s\n%s", want, stderr)
		}
	}
	agent.checkNoProblems(t)
	spans := agent.spans()
	if len(spans) != 6 {
		t.Fatalf("got %d spans, want 6", len(spans))
	}
	for _, rs := range spans {
		rank := intAttr(t, rs.resource, "training.rank")
		step := intAttr(t, rs.span.Attributes(), "iteration.step")
		checkIdentity(t, fmt.Sprintf("rank %d step %d", rank, step), rs.span.Attributes(), rs.resource,
			steprecord.Identity{Job: job, Attempt: 1, Step: step, Rank: rank})
		traceID, spanID, _ := contractIDs(job, 1, step, rank)
		if rs.span.TraceID().String() != traceID || rs.span.SpanID().String() != spanID {
			t.Errorf("rank %d step %d: ids %s/%s, want %s/%s", rank, step, rs.span.TraceID(), rs.span.SpanID(), traceID, spanID)
		}
		if got, want := rs.span.StartTimestamp(), pcommon.Timestamp(base+step*1e9); got != want {
			t.Errorf("rank %d step %d: start %d, want %d", rank, step, got, want)
		}
		if v := strAttr(t, rs.resource, "host.name"); v != fmt.Sprintf("replay-n%d", rank) {
			t.Errorf("rank %d: host.name %q", rank, v)
		}
		if v := intAttr(t, rs.resource, "training.pp_stage"); v != rank {
			t.Errorf("rank %d: training.pp_stage %d", rank, v)
		}
		if v := strAttr(t, rs.resource, "service.name"); v != "train" {
			t.Errorf("rank %d: service.name %q", rank, v)
		}
		if _, ok := rs.resource.Get("k8s.pod.uid"); ok {
			t.Errorf("rank %d: the replay's own pod uid was sent", rank)
		}
		if v := intAttr(t, rs.span.Attributes(), "training.phase.backward_ns"); v != 3e6 {
			t.Errorf("rank %d step %d: backward %d", rank, step, v)
		}
		if v := intAttr(t, rs.span.Attributes(), "nccl.collectives.count"); v != 4 {
			t.Errorf("rank %d step %d: nccl.collectives.count %d", rank, step, v)
		}
		if v := doubleAttr(t, rs.span.Attributes(), "training.loss"); math.IsNaN(v) != (step == 2) {
			t.Errorf("rank %d step %d: loss %v; NaN only on step 2", rank, step, v)
		}
	}
}

// runPython runs python3 with the module's directory on PYTHONPATH and a
// clean job environment.
func runPython(t *testing.T, stdin *strings.Reader, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	sdkDir, err := filepath.Abs("..")
	if err != nil {
		return "", "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "python3", args...)
	cmd.Env = append(cleanEnvironment(), "PYTHONPATH="+sdkDir, "PYTHONDONTWRITEBYTECODE=1")
	if stdin != nil {
		cmd.Stdin = stdin
	}
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// shape lists a map's keys with their value types, sorted, less the values
// that differ by nature between two processes and two steps.
func shape(m pcommon.Map) string {
	var out []string
	m.Range(func(k string, v pcommon.Value) bool {
		out = append(out, k+":"+v.Type().String())
		return true
	})
	sort.Strings(out)
	return strings.Join(out, " ")
}

func insertSorted(list, item string) string {
	parts := append(strings.Fields(list), item)
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

func keys(m map[string]receivedSpan) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
