package sdktest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/otelcol-gpu/otelcol-gpu/internal/steprecord"
)

// manualWaitScript times steps on a simulated clock (ms) with the SDK's
// manual calls for frameworks other than DDP: comm_wait() around a wait,
// inside a phase and outside, phase("comm_wait"), record_comm_wait(ns),
// compute_done() (an FSDP-style hook), and compute_only_phases=True. Rank 0
// times on the CPU clock, rank 1 with the stand-in's CUDA events.
const manualWaitScript = `
import json, sys, time, types
cfg = json.loads(sys.argv[1])
class Clock(object):
    ms = 0.0
clock = Clock()
class Event(object):
    def __init__(self, enable_timing=False):
        self.at = None
    def record(self):
        self.at = clock.ms
    def query(self):
        return True
    def elapsed_time(self, end):
        return end.at - self.at
torch = types.ModuleType("torch")
torch.cuda = types.SimpleNamespace(is_available=lambda: True, Event=Event, current_device=lambda: 0,
    get_device_properties=lambda i: types.SimpleNamespace(uuid="58d0ef2e-1c2b-4f3a-9d8e-7a6b5c4d3e2f"))
sys.modules["torch"] = torch
time.perf_counter_ns = lambda: int(round(clock.ms * 1e6))
import otelcol_gpu_step

def run(steps):
    with steps.step(0):  # no comm call yet: no comm_wait_ns
        with steps.phase("backward"):
            clock.ms += 300
    with steps.step(1):  # a wait inside the backward: out of it, into comm_wait
        with steps.phase("backward"):
            clock.ms += 300
            with steps.comm_wait():
                clock.ms += 50
    with steps.step(2):  # waits outside any phase, timed and reported
        with steps.phase("backward"):
            clock.ms += 300
        with steps.phase("comm_wait"):
            clock.ms += 3
        steps.record_comm_wait(7000000)
        steps.record_comm_wait(-1)    # refused, logged
        steps.record_comm_wait("7")   # refused, logged
    with steps.step(3):  # FSDP-style: compute done at the last gradient, then the wait
        with steps.phase("backward"):
            clock.ms += 250
            steps.compute_done()
            clock.ms += 40
    with steps.step(4):  # nothing this step: comm_wait_ns 0, the phases are compute
        with steps.phase("backward"):
            clock.ms += 300
    steps.compute_done()  # outside a step: ignored, logged
    steps.close()
    return [steps.sent, steps.dropped]

kw = dict(job_id=cfg["job"], world_size=3, endpoint=cfg["endpoint"], flush_interval=0.05, register_atexit=False)
out = {"cpu": run(otelcol_gpu_step.Steps(rank=0, timing="cpu", **kw)),
       "cuda": run(otelcol_gpu_step.Steps(rank=1, timing="cuda", **kw))}
declared = otelcol_gpu_step.Steps(rank=2, timing="cpu", compute_only_phases=True, **kw)
with declared.step(0):
    with declared.phase("forward"):
        clock.ms += 100
declared.record_step(1, 1790000000000000000, 1790000001000000000, phases_ns={"forward": 100000000})
declared.close()
out["declared"] = [declared.sent, declared.dropped]
print(json.dumps(out))
`

// The manual calls put a step's exposed communication wait in
// training.phase.comm_wait_ns and keep it out of the phases; a script that
// never used them sends no comm_wait_ns (its phases may include waits), and
// once it has, every later step carries it, 0 included.
func TestManualCommWait(t *testing.T) {
	requirePython3(t)
	const job = "manual-comm-wait"
	agent := startAgent(t)
	arg, err := json.Marshal(map[string]any{"job": job, "endpoint": agent.srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err := runPython(t, nil, "-c", manualWaitScript, string(arg))
	if err != nil {
		t.Fatalf("python3: %v\nstderr:\n%s", err, stderr)
	}
	var counts map[string][2]int
	if err := json.Unmarshal([]byte(strings.TrimSpace(stdout)), &counts); err != nil {
		t.Fatalf("decoding %q: %v\nstderr:\n%s", stdout, err, stderr)
	}
	if fmt.Sprint(counts) != "map[cpu:[5 0] cuda:[5 0] declared:[2 0]]" {
		t.Errorf("sent/dropped %v, want 5, 5 and 2 sent, none dropped", counts)
	}
	for _, want := range []string{"record_comm_wait(-1) ignored", "compute_done() (a DDP bucket ready) outside a phase"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not warn %q:\n%s", want, stderr)
		}
	}
	agent.checkNoProblems(t)

	const ms = int64(1_000_000)
	type want struct{ backward, forward, wait int64 } // -1: absent
	wants := map[string]want{
		"0/0": {300 * ms, -1, -1}, "0/1": {300 * ms, -1, 50 * ms}, "0/2": {300 * ms, -1, 10 * ms},
		"0/3": {250 * ms, -1, 40 * ms}, "0/4": {300 * ms, -1, 0},
		"2/0": {-1, 100 * ms, 0}, "2/1": {-1, 100 * ms, 0},
	}
	for _, k := range []string{"0", "1", "2", "3", "4"} {
		wants["1/"+k] = wants["0/"+k]
	}
	seen := map[string]bool{}
	for _, rs := range agent.spans() {
		rank := intAttr(t, rs.resource, "training.rank")
		step := intAttr(t, rs.span.Attributes(), "iteration.step")
		key := fmt.Sprintf("%d/%d", rank, step)
		seen[key] = true
		w, ok := wants[key]
		if !ok {
			t.Errorf("unexpected span of rank %d step %d", rank, step)
			continue
		}
		rec := steprecord.Read(rs.span.Attributes(), rs.resource)
		if id, err := rec.Identity(); err != nil || id != (steprecord.Identity{Job: job, Step: step, Rank: rank}) {
			t.Errorf("%s: identity %+v, %v", key, id, err)
		}
		a := rs.span.Attributes()
		for attr, v := range map[string]int64{"training.phase.backward_ns": w.backward, "training.phase.forward_ns": w.forward,
			"training.phase.comm_wait_ns": w.wait} {
			if v < 0 {
				if got, ok := a.Get(attr); ok {
					t.Errorf("rank %d step %d: %s = %s, want none", rank, step, attr, got.AsString())
				}
				continue
			}
			if got := intAttr(t, a, attr); got != v {
				t.Errorf("rank %d step %d: %s = %d, want %d", rank, step, attr, got, v)
			}
		}
	}
	if len(seen) != len(wants) {
		t.Errorf("got spans %v, want %d", seen, len(wants))
	}
}
