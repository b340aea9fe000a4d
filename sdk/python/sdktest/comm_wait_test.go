package sdktest

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/otelcol-gpu/otelcol-gpu/internal/steprecord"
)

// ddpScript is one rank of a data-parallel job under a stand-in for torch
// and DistributedDataParallel, on a simulated clock (milliseconds, the same
// on every rank) so that the times are exact. Each step: dataload 5 ms,
// then per micro-batch forward and backward, rank cfg["slow"] computing
// cfg["factor"] x slower than its peers. The last micro-batch's backward
// produces 4 gradient buckets in turn; DDP calls the communication hook for
// each as it is ready, and the all-reduce of bucket k completes, on every
// rank, 20 ms after the last rank's bucket k was ready and the previous
// all-reduce completed. The backward ends (on the stream) when the last
// all-reduce has completed, as DDP's reducer waits for it. Earlier
// micro-batches run under no_sync: no buckets, no wait. Optimizer 10 ms.
//
// With timing "cuda" the stand-in's CUDA events read the clock when
// recorded and complete on their second query; with "cpu" the clock is
// time.perf_counter_ns.
const ddpScript = `
import inspect, json, sys, time, types
cfg = json.loads(sys.argv[1])
FWD, BWD, BUCKETS, TRANSFER, DATALOAD, OPT = 200.0, 400.0, 4, 20.0, 5.0, 10.0
ranks, slow, factor, micro = cfg["ranks"], cfg["slow"], cfg["factor"], cfg["micro"]

class Clock(object):
    ms = 0.0
clock = Clock()

class Event(object):
    def __init__(self, enable_timing=False):
        self.at, self.queries = None, 0
    def record(self):
        self.at = clock.ms
    def query(self):
        self.queries += 1
        return self.queries >= 2
    def elapsed_time(self, end):
        return end.at - self.at

torch = types.ModuleType("torch")
torch.cuda = types.SimpleNamespace(is_available=lambda: cfg["timing"] == "cuda", Event=Event, current_device=lambda: 0,
    get_device_properties=lambda i: types.SimpleNamespace(uuid="58d0ef2e-1c2b-4f3a-9d8e-7a6b5c4d3e2f"))
sys.modules["torch"] = torch
allreduces = []
class Future(object):
    pass
def allreduce_hook(process_group, bucket):  # torch's default hook, stand-in
    allreduces.append((process_group, bucket))
    return Future()
hooks = types.ModuleType("default_hooks")
hooks.allreduce_hook = allreduce_hook
sys.modules["torch.distributed.algorithms.ddp_comm_hooks.default_hooks"] = hooks
if cfg["timing"] == "cpu":
    time.perf_counter_ns = lambda: int(round(clock.ms * 1e6))

def scale(r, ms):
    return ms * factor if r == slow else ms

def ready(r, k):  # bucket k (1..4) of rank r, from the step's start
    before = DATALOAD + (micro - 1) * (scale(r, FWD) + scale(r, BWD)) / micro
    return before + scale(r, FWD) / micro + scale(r, BWD) / micro * k / BUCKETS

done = [0.0]
for k in range(1, BUCKETS + 1):
    done.append(max([done[k - 1]] + [ready(r, k) for r in range(ranks)]) + TRANSFER)

class DDP(object):
    """The part of DistributedDataParallel the SDK touches."""
    def __init__(self):
        self.hook, self.state, self.sync = None, None, True
    def register_comm_hook(self, state, hook):
        if self.hook is not None:
            raise RuntimeError("register_comm_hook or register_builtin_comm_hook can only be called once.")
        inspect.signature(hook).parameters["bucket"]  # what DDP checks
        self.hook, self.state = hook, state
    def backward(self, rank, step_start):
        if not self.sync:  # no_sync(): gradients accumulate locally
            clock.ms += scale(rank, BWD) / micro
            return
        for k in range(1, BUCKETS + 1):
            clock.ms = step_start + ready(rank, k)
            fut = self.hook(self.state, "bucket-%d" % k)
            assert isinstance(fut, Future), "the hook must return the all-reduce's future"
        clock.ms = step_start + done[BUCKETS]  # the reducer waits for the last all-reduce

import otelcol_gpu_step
steps = otelcol_gpu_step.Steps(job_id=cfg["job"], rank=cfg["rank"], world_size=ranks, endpoint=cfg["endpoint"],
                               flush_interval=0.05, timing=cfg["timing"], register_atexit=False)
model = DDP()
if cfg["attach"] == "attach_ddp":
    steps.attach_ddp(model, state="pg")
    steps.attach_ddp(model)  # a second hook is refused: logged, not raised
else:
    model.register_comm_hook("pg", steps.comm_hook)
for n in range(cfg["steps"]):
    start = clock.ms = n * 10000.0
    with steps.step(n):
        with steps.phase("dataload"):
            clock.ms += DATALOAD
        for m in range(micro):
            model.sync = m == micro - 1
            with steps.phase("forward"):
                clock.ms += scale(cfg["rank"], FWD) / micro
            with steps.phase("backward"):
                model.backward(cfg["rank"], start)
        with steps.phase("optimizer"):
            clock.ms += OPT
steps.close()
print(json.dumps({"sent": steps.sent, "dropped": steps.dropped, "allreduces": len(allreduces),
                  "states": sorted(set(str(s) for s, _ in allreduces))}))
`

// A data-parallel job whose backward overlaps the gradient all-reduce, one
// rank of 8 computing 2.35x slower: with the SDK's DDP hook every rank
// reports its own compute as backward_ns (the slow rank's is 2.35x its
// peers') and the wait for the all-reduce as comm_wait_ns (the slow rank's
// is the smallest: it waits for its last transfer only). Timed with CUDA
// events and on the CPU clock, through attach_ddp() and through
// register_comm_hook(state, steps.comm_hook), with and without gradient
// accumulation.
func TestDDPHookReportsComputeAndCommWait(t *testing.T) {
	requirePython3(t)
	const (
		ranks  = 8
		slow   = 5
		factor = 2.35
		steps  = 2
	)
	for _, tc := range []struct {
		timing, attach string
		micro          int
	}{
		{"cuda", "attach_ddp", 1},
		{"cpu", "register", 1},
		{"cuda", "register", 2},
		{"cpu", "attach_ddp", 2},
	} {
		name := fmt.Sprintf("%s/%s/micro%d", tc.timing, tc.attach, tc.micro)
		t.Run(name, func(t *testing.T) {
			job := "ddp-" + strings.ReplaceAll(name, "/", "-")
			agent := startAgent(t)
			var wg sync.WaitGroup
			for r := 0; r < ranks; r++ {
				wg.Add(1)
				go func(r int) {
					defer wg.Done()
					arg, err := json.Marshal(map[string]any{"job": job, "rank": r, "ranks": ranks, "slow": slow, "factor": factor,
						"micro": tc.micro, "timing": tc.timing, "attach": tc.attach, "steps": steps, "endpoint": agent.srv.URL})
					if err != nil {
						t.Error(err)
						return
					}
					stdout, stderr, err := runPython(t, nil, "-c", ddpScript, string(arg))
					if err != nil {
						t.Errorf("rank %d: %v\nstderr:\n%s", r, err, stderr)
						return
					}
					var res struct {
						Sent, Dropped, Allreduces int
						States                    []string
					}
					if err := json.Unmarshal([]byte(strings.TrimSpace(stdout)), &res); err != nil {
						t.Errorf("rank %d: decoding %q: %v\nstderr:\n%s", r, stdout, err, stderr)
						return
					}
					if res.Sent != steps || res.Dropped != 0 {
						t.Errorf("rank %d: sent %d, dropped %d", r, res.Sent, res.Dropped)
					}
					if res.Allreduces != 4*steps || fmt.Sprint(res.States) != "[pg]" {
						t.Errorf("rank %d: the default all-reduce hook ran %d times with states %v, want %d times with the registered state pg",
							r, res.Allreduces, res.States, 4*steps)
					}
					if tc.attach == "attach_ddp" && !strings.Contains(stderr, "refused the communication hook") {
						t.Errorf("rank %d: a refused second hook was not logged:\n%s", r, stderr)
					}
				}(r)
			}
			wg.Wait()
			agent.checkNoProblems(t)

			// Expected, in ms from the step's start: healthy buckets ready at
			// 305, 405, 505, 605; the slow rank's at 710, 945, 1180, 1415 (its
			// forward is 470, its backward 940). All-reduces complete at 730,
			// 965, 1200, 1435 (micro-batches split forward and backward evenly:
			// the same times).
			wantBackward := map[bool]int64{false: 400_000_000, true: 940_000_000}
			wantForward := map[bool]int64{false: 200_000_000, true: 470_000_000}
			wantWait := map[bool]int64{false: 830_000_000, true: 20_000_000}
			backward := map[int64]int64{}
			wait := map[int64]int64{}
			spans := agent.spans()
			if len(spans) != ranks*steps {
				t.Fatalf("got %d spans, want %d", len(spans), ranks*steps)
			}
			for _, rs := range spans {
				rank := intAttr(t, rs.resource, "training.rank")
				step := intAttr(t, rs.span.Attributes(), "iteration.step")
				key := fmt.Sprintf("rank %d step %d", rank, step)
				checkIdentity(t, key, rs.span.Attributes(), rs.resource, steprecord.Identity{Job: job, Step: step, Rank: rank})
				a := rs.span.Attributes()
				isSlow := rank == slow
				for attr, want := range map[string]int64{
					"training.phase.dataload_ns":  5_000_000,
					"training.phase.forward_ns":   wantForward[isSlow],
					"training.phase.backward_ns":  wantBackward[isSlow],
					"training.phase.optimizer_ns": 10_000_000,
					"training.phase.comm_wait_ns": wantWait[isSlow],
				} {
					if v := intAttr(t, a, attr); v != want {
						t.Errorf("%s: %s = %d, want %d", key, attr, v, want)
					}
				}
				backward[rank] = intAttr(t, a, "training.phase.backward_ns")
				wait[rank] = intAttr(t, a, "training.phase.comm_wait_ns")
			}
			for r := int64(0); r < ranks; r++ {
				if r == slow {
					continue
				}
				if ratio := float64(backward[slow]) / float64(backward[r]); math.Abs(ratio-factor) > 1e-9 {
					t.Errorf("slow rank's backward is %.4fx rank %d's, want %.2fx", ratio, r, factor)
				}
				if wait[slow] >= wait[r] {
					t.Errorf("slow rank's comm wait %d is not below rank %d's %d", wait[slow], r, wait[r])
				}
			}
		})
	}
}
