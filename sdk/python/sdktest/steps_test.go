package sdktest

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-gpu/otelcol-gpu/internal/steprecord"
)

var phaseAttributes = []string{
	"training.phase.dataload_ns", "training.phase.forward_ns",
	"training.phase.backward_ns", "training.phase.optimizer_ns",
}

// Eight ranks of one job, each a separate python3 process that knows only
// its own rank, produce one trace per step with one span per rank, every id
// exactly the contract's.
func TestEightRanksShareOneTracePerStep(t *testing.T) {
	requirePython3(t)
	const (
		job   = "llama-test-8"
		ranks = 8
		steps = 3
		nan   = 1 // the step whose loss is NaN
	)
	agent := startAgent(t)
	results := make([]scriptResult, ranks)
	var wg sync.WaitGroup
	for r := 0; r < ranks; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			results[r] = runScript(t, scriptConfig{
				First: 0, Count: steps, NaNStep: nan,
				StepsKwarg: map[string]any{
					"endpoint": agent.srv.URL, "flush_interval": 0.05,
					"pp_stage": r / 4, "dp_replica": r % 4, "tp_rank": 0,
				},
			}, map[string]string{
				"TORCHELASTIC_RUN_ID":        job,
				"TORCHELASTIC_RESTART_COUNT": "0",
				"RANK":                       fmt.Sprint(r),
				"LOCAL_RANK":                 fmt.Sprint(r),
				"WORLD_SIZE":                 fmt.Sprint(ranks),
				"OTEL_SERVICE_NAME":          "trainer",
				"CUDA_VISIBLE_DEVICES":       fmt.Sprintf("GPU-00000000-0000-0000-0000-00000000000%d", r),
				"K8S_POD_UID":                fmt.Sprintf("pod-%d", r),
			})
		}(r)
	}
	wg.Wait()
	agent.checkNoProblems(t)
	for r, res := range results {
		if res.Sent != steps || res.Dropped != 0 {
			t.Errorf("rank %d: sent %d, dropped %d; want %d sent, none dropped", r, res.Sent, res.Dropped, steps)
		}
	}

	byTrace := map[string][]int64{} // trace id -> ranks
	seen := map[string]bool{}
	for _, rs := range agent.spans() {
		span, res := rs.span, rs.resource
		rank := intAttr(t, res, "training.rank")
		step := intAttr(t, span.Attributes(), "iteration.step")
		key := fmt.Sprintf("step %d rank %d", step, rank)
		if seen[key] {
			t.Errorf("%s: sent twice", key)
		}
		seen[key] = true
		checkIdentity(t, key, span.Attributes(), res, steprecord.Identity{Job: job, Step: step, Rank: rank})

		traceID, spanID, rootID := contractIDs(job, 0, step, rank)
		if got := span.TraceID().String(); got != traceID {
			t.Errorf("%s: trace id %s, want %s", key, got, traceID)
		}
		if got := span.SpanID().String(); got != spanID {
			t.Errorf("%s: span id %s, want %s", key, got, spanID)
		}
		if got := span.ParentSpanID().String(); got != rootID {
			t.Errorf("%s: parent span id %s, want the step root %s", key, got, rootID)
		}
		byTrace[span.TraceID().String()] = append(byTrace[span.TraceID().String()], rank)

		if span.Name() != "train.step" || span.Kind() != ptrace.SpanKindInternal {
			t.Errorf("%s: span %q kind %v, want train.step, internal", key, span.Name(), span.Kind())
		}
		if span.StartTimestamp() == 0 || span.EndTimestamp() <= span.StartTimestamp() {
			t.Errorf("%s: times %d..%d", key, span.StartTimestamp(), span.EndTimestamp())
		}
		for _, name := range phaseAttributes {
			if v := intAttr(t, span.Attributes(), name); v <= 0 {
				t.Errorf("%s: %s = %d, want > 0", key, name, v)
			}
		}
		if v := intAttr(t, span.Attributes(), "training.tokens"); v != 4096 {
			t.Errorf("%s: training.tokens = %d", key, v)
		}
		loss := doubleAttr(t, span.Attributes(), "training.loss")
		if (step == nan) != math.IsNaN(loss) {
			t.Errorf("%s: training.loss = %v; NaN is expected exactly on step %d", key, loss, nan)
		}
		if v := doubleAttr(t, span.Attributes(), "training.flops"); v != 1.5e15 {
			t.Errorf("%s: training.flops = %v", key, v)
		}

		if v := strAttr(t, res, "service.name"); v != "trainer" {
			t.Errorf("%s: service.name = %q", key, v)
		}
		if v := strAttr(t, res, "training.job.id"); v != job {
			t.Errorf("%s: training.job.id = %q", key, v)
		}
		if v := intAttr(t, res, "training.attempt"); v != 0 {
			t.Errorf("%s: training.attempt = %d", key, v)
		}
		if v := intAttr(t, res, "training.local_rank"); v != rank {
			t.Errorf("%s: training.local_rank = %d", key, v)
		}
		if v := intAttr(t, res, "training.world_size"); v != ranks {
			t.Errorf("%s: training.world_size = %d", key, v)
		}
		if rank >= 0 && rank < ranks {
			if v := strAttr(t, res, "host.name"); v == "" || v != results[rank].Host {
				t.Errorf("%s: host.name = %q, want %q", key, v, results[rank].Host)
			}
			if v := intAttr(t, res, "process.pid"); v != results[rank].PID {
				t.Errorf("%s: process.pid = %d, want %d", key, v, results[rank].PID)
			}
		}
		if v := strAttr(t, res, "gpu.uuid"); v != fmt.Sprintf("GPU-00000000-0000-0000-0000-00000000000%d", rank) {
			t.Errorf("%s: gpu.uuid = %q", key, v)
		}
		if v := strAttr(t, res, "k8s.pod.uid"); v != fmt.Sprintf("pod-%d", rank) {
			t.Errorf("%s: k8s.pod.uid = %q", key, v)
		}
		if v := intAttr(t, res, "training.pp_stage"); v != rank/4 {
			t.Errorf("%s: training.pp_stage = %d", key, v)
		}
		if v := intAttr(t, res, "training.dp_replica"); v != rank%4 {
			t.Errorf("%s: training.dp_replica = %d", key, v)
		}
		if v := intAttr(t, res, "training.tp_rank"); v != 0 {
			t.Errorf("%s: training.tp_rank = %d", key, v)
		}
	}
	if len(seen) != ranks*steps {
		t.Errorf("got %d rank-step spans, want %d", len(seen), ranks*steps)
	}
	if len(byTrace) != steps {
		t.Errorf("got %d traces, want one per step (%d)", len(byTrace), steps)
	}
	for id, got := range byTrace {
		sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
		if fmt.Sprint(got) != "[0 1 2 3 4 5 6 7]" {
			t.Errorf("trace %s holds ranks %v, want all eight once", id, got)
		}
	}
}

// A restarted job replays step numbers: attempt 1 must land in other traces
// than attempt 0. The Slurm variables give the same ids as torchrun's.
func TestAttemptOneDoesNotCollideWithAttemptZero(t *testing.T) {
	requirePython3(t)
	const job = "llama-test-restart"
	agent := startAgent(t)
	kwargs := map[string]any{"endpoint": agent.srv.URL, "flush_interval": 0.05}
	runScript(t, scriptConfig{Count: 2, StepsKwarg: kwargs},
		map[string]string{"TORCHELASTIC_RUN_ID": job, "TORCHELASTIC_RESTART_COUNT": "0", "RANK": "1"})
	runScript(t, scriptConfig{Count: 2, StepsKwarg: kwargs},
		map[string]string{"TORCHELASTIC_RUN_ID": job, "TORCHELASTIC_RESTART_COUNT": "1", "RANK": "1"})
	// torchrun's default rendezvous id "none" is no job id: Slurm's is used.
	runScript(t, scriptConfig{Count: 2, StepsKwarg: kwargs},
		map[string]string{"TORCHELASTIC_RUN_ID": "none", "SLURM_JOB_ID": job, "SLURM_RESTART_COUNT": "1", "SLURM_PROCID": "1"})
	agent.checkNoProblems(t)

	spans := agent.spans()
	if len(spans) != 6 {
		t.Fatalf("got %d spans, want 6", len(spans))
	}
	traceOf := map[string]string{} // "attempt/step" -> trace id
	for _, rs := range spans {
		attempt := intAttr(t, rs.resource, "training.attempt")
		step := intAttr(t, rs.span.Attributes(), "iteration.step")
		checkIdentity(t, fmt.Sprintf("attempt %d step %d", attempt, step), rs.span.Attributes(), rs.resource,
			steprecord.Identity{Job: job, Attempt: attempt, Step: step, Rank: 1})
		if v := strAttr(t, rs.resource, "training.job.id"); v != job {
			t.Errorf("training.job.id = %q, want %q", v, job)
		}
		if v := intAttr(t, rs.resource, "training.rank"); v != 1 {
			t.Errorf("training.rank = %d, want 1", v)
		}
		traceID, spanID, rootID := contractIDs(job, attempt, step, 1)
		if rs.span.TraceID().String() != traceID || rs.span.SpanID().String() != spanID || rs.span.ParentSpanID().String() != rootID {
			t.Errorf("attempt %d step %d: ids %s/%s/%s, want %s/%s/%s", attempt, step,
				rs.span.TraceID(), rs.span.SpanID(), rs.span.ParentSpanID(), traceID, spanID, rootID)
		}
		key := fmt.Sprintf("%d/%d", attempt, step)
		if prev, ok := traceOf[key]; ok && prev != traceID {
			t.Errorf("attempt %d step %d: two traces %s and %s", attempt, step, prev, traceID)
		}
		traceOf[key] = traceID
	}
	for step := 0; step < 2; step++ {
		a0, a1 := traceOf[fmt.Sprintf("0/%d", step)], traceOf[fmt.Sprintf("1/%d", step)]
		if a0 == "" || a1 == "" || a0 == a1 {
			t.Errorf("step %d: attempt 0 trace %q, attempt 1 trace %q: want two different traces", step, a0, a1)
		}
	}
}

// Steps sent as log records carry the same attributes plus duration_ns, and
// the contract's trace and span ids.
func TestLogRecordMode(t *testing.T) {
	requirePython3(t)
	const job = "llama-test-logs"
	agent := startAgent(t)
	for r := 0; r < 2; r++ {
		res := runScript(t, scriptConfig{First: 10, Count: 3, StepsKwarg: map[string]any{
			"job_id": job, "attempt": 2, "rank": r, "world_size": 2, "mode": "logs",
			"endpoint": agent.srv.URL, "flush_interval": 0.05,
		}}, nil)
		if res.Sent != 3 || res.Dropped != 0 {
			t.Errorf("rank %d: sent %d, dropped %d", r, res.Sent, res.Dropped)
		}
	}
	agent.checkNoProblems(t)
	if n := len(agent.spans()); n != 0 {
		t.Errorf("log mode sent %d spans", n)
	}
	records := agent.logRecords()
	if len(records) != 6 {
		t.Fatalf("got %d log records, want 6", len(records))
	}
	for _, rl := range records {
		rec, attrs := rl.record, rl.record.Attributes()
		rank := intAttr(t, rl.resource, "training.rank")
		step := intAttr(t, attrs, "iteration.step")
		checkIdentity(t, fmt.Sprintf("rank %d step %d", rank, step), attrs, rl.resource,
			steprecord.Identity{Job: job, Attempt: 2, Step: step, Rank: rank})
		if v := intAttr(t, rl.resource, "training.attempt"); v != 2 {
			t.Errorf("training.attempt = %d, want 2", v)
		}
		if v := strAttr(t, rl.resource, "training.job.id"); v != job {
			t.Errorf("training.job.id = %q", v)
		}
		traceID, spanID, _ := contractIDs(job, 2, step, rank)
		if rec.TraceID().String() != traceID || rec.SpanID().String() != spanID {
			t.Errorf("rank %d step %d: ids %s/%s, want %s/%s", rank, step, rec.TraceID(), rec.SpanID(), traceID, spanID)
		}
		if v := intAttr(t, attrs, "duration_ns"); v <= 0 {
			t.Errorf("rank %d step %d: duration_ns = %d", rank, step, v)
		}
		for _, name := range phaseAttributes {
			if v := intAttr(t, attrs, name); v <= 0 {
				t.Errorf("rank %d step %d: %s = %d", rank, step, name, v)
			}
		}
		intAttr(t, attrs, "training.tokens")
		doubleAttr(t, attrs, "training.loss")
		doubleAttr(t, attrs, "training.flops")
		if v := strAttr(t, attrs, "event.name"); v != "train.step" {
			t.Errorf("event.name = %q", v)
		}
		if rec.Timestamp() == 0 {
			t.Errorf("rank %d step %d: no timestamp", rank, step)
		}
	}
}

// An agent that is down costs the training loop nothing; what was lost is
// counted. No torch here: the flight-recorder dumps asked for just stop.
func TestAgentDownDoesNotBlockAndCountsDrops(t *testing.T) {
	requirePython3(t)
	const count = 50
	res := runScript(t, scriptConfig{Count: count, StepsKwarg: map[string]any{
		"job_id": "down", "endpoint": closedEndpoint(t), "flush_interval": 0.01,
		"timeout": 0.5, "close_timeout": 1.0, "dump_flight_recorder_every": 1, "dump_dir": t.TempDir(),
	}}, nil)
	if res.Sent != 0 || res.Dropped != count {
		t.Errorf("sent %d, dropped %d; want 0 sent and all %d dropped", res.Sent, res.Dropped, count)
	}
	if res.Dumps != 0 {
		t.Errorf("%d flight-recorder dumps without torch", res.Dumps)
	}
	// Generous bounds: 50 steps sleep 40 ms in all; close() waits at most 1 s.
	if res.LoopS > 5 || res.CloseS > 5 {
		t.Errorf("training loop took %.2fs, close %.2fs: the SDK blocked", res.LoopS, res.CloseS)
	}
}

// An agent that accepts connections and never answers: the queue fills and
// drops, the loop does not wait, close() keeps its bound.
func TestHungAgentDoesNotBlock(t *testing.T) {
	requirePython3(t)
	const count = 200
	agent := startHungAgent(t)
	res := runScript(t, scriptConfig{Count: count, StepsKwarg: map[string]any{
		"job_id": "hung", "endpoint": agent.srv.URL, "flush_interval": 0.01,
		"max_queue": 16, "max_batch": 8, "timeout": 0.2, "close_timeout": 0.5,
	}}, nil)
	if res.Sent != 0 || res.Dropped != count {
		t.Errorf("sent %d, dropped %d; want 0 sent and all %d dropped", res.Sent, res.Dropped, count)
	}
	if res.LoopS > 5 || res.CloseS > 5 {
		t.Errorf("training loop took %.2fs, close %.2fs: the SDK blocked", res.LoopS, res.CloseS)
	}
	agent.mu.Lock()
	requests := agent.requests
	agent.mu.Unlock()
	if requests == 0 {
		t.Error("the SDK never reached the hung agent")
	}
}

// Without a job id the SDK sends nothing (a per-node id would split every
// trace) and the loop runs as usual.
func TestNoJobIDSendsNothing(t *testing.T) {
	requirePython3(t)
	agent := startAgent(t)
	res := runScript(t, scriptConfig{Count: 3, StepsKwarg: map[string]any{"endpoint": agent.srv.URL}},
		map[string]string{"TORCHELASTIC_RUN_ID": "none", "RANK": "0"})
	if res.Enabled || res.Sent != 0 {
		t.Errorf("enabled %v, sent %d; want disabled, nothing sent", res.Enabled, res.Sent)
	}
	agent.mu.Lock()
	defer agent.mu.Unlock()
	if agent.requests != 0 {
		t.Errorf("agent got %d requests", agent.requests)
	}
}

// Sampled steps get one child span per phase under the rank span; a step
// whose body raised is marked as an error.
func TestPhaseSpansAndFailedStep(t *testing.T) {
	requirePython3(t)
	const job = "llama-test-phases"
	agent := startAgent(t)
	runScript(t, scriptConfig{Count: 4, RaiseStep: 3, StepsKwarg: map[string]any{
		"job_id": job, "rank": 5, "endpoint": agent.srv.URL, "flush_interval": 0.05, "phase_spans_every": 2,
	}}, nil)
	agent.checkNoProblems(t)
	children := map[int64][]string{}
	stepSpans := 0
	for _, rs := range agent.spans() {
		step := intAttr(t, rs.span.Attributes(), "iteration.step")
		traceID, spanID, _ := contractIDs(job, 0, step, 5)
		if rs.span.TraceID().String() != traceID {
			t.Errorf("%s of step %d: trace %s, want %s", rs.span.Name(), step, rs.span.TraceID(), traceID)
		}
		if rs.span.Name() == "train.step" {
			stepSpans++
			checkIdentity(t, fmt.Sprintf("step %d", step), rs.span.Attributes(), rs.resource,
				steprecord.Identity{Job: job, Step: step, Rank: 5})
			failed := rs.span.Status().Code() == ptrace.StatusCodeError
			if failed != (step == 3) {
				t.Errorf("step %d: status %v; only step 3 raised", step, rs.span.Status().Code())
			}
			if step == 3 && strAttr(t, rs.span.Attributes(), "error.type") != "RuntimeError" {
				t.Error("step 3: error.type is not RuntimeError")
			}
			continue
		}
		if rs.span.ParentSpanID().String() != spanID {
			t.Errorf("%s of step %d: parent %s, want the rank span %s", rs.span.Name(), step, rs.span.ParentSpanID(), spanID)
		}
		children[step] = append(children[step], rs.span.Name())
	}
	if stepSpans != 4 {
		t.Errorf("got %d step spans, want 4", stepSpans)
	}
	for _, step := range []int64{0, 2} {
		sort.Strings(children[step])
		want := "[train.phase.backward train.phase.dataload train.phase.forward train.phase.optimizer]"
		if fmt.Sprint(children[step]) != want {
			t.Errorf("step %d: phase spans %v, want %s", step, children[step], want)
		}
	}
	if len(children) != 2 {
		t.Errorf("phase spans on steps %v, want only the sampled steps 0 and 2", children)
	}
}

// With torch and CUDA present (a stand-in here), phases are timed with CUDA
// events, read only once they completed, and the GPU is named from torch.
func TestCUDAEventTiming(t *testing.T) {
	requirePython3(t)
	agent := startAgent(t)
	res := runScript(t, scriptConfig{Count: 3, FakeTorch: true, FakeCUDA: true, StepsKwarg: map[string]any{
		"job_id": "cuda", "endpoint": agent.srv.URL, "flush_interval": 0.05,
	}}, nil)
	agent.checkNoProblems(t)
	if res.Sent != 3 || res.Dropped != 0 {
		t.Errorf("sent %d, dropped %d; want 3 sent", res.Sent, res.Dropped)
	}
	spans := agent.spans()
	if len(spans) != 3 {
		t.Fatalf("got %d spans, want 3", len(spans))
	}
	for _, rs := range spans {
		for _, name := range phaseAttributes {
			// The stand-in's elapsed_time is 12.5 ms: CPU timing would give ~0.2 ms.
			if v := intAttr(t, rs.span.Attributes(), name); v != 12_500_000 {
				t.Errorf("%s = %d, want 12500000 from the CUDA events", name, v)
			}
		}
		if v := strAttr(t, rs.resource, "gpu.uuid"); v != "GPU-58d0ef2e-1c2b-4f3a-9d8e-7a6b5c4d3e2f" {
			t.Errorf("gpu.uuid = %q", v)
		}
	}
}

// Flight-recorder dumps land in the watched directory under the name the
// ncclflight receiver expects, whole (written aside, then renamed).
func TestFlightRecorderDump(t *testing.T) {
	requirePython3(t)
	dir := t.TempDir()
	res := runScript(t, scriptConfig{Count: 5, FakeTorch: true, StepsKwarg: map[string]any{
		"job_id": "fr", "rank": 3, "endpoint": closedEndpoint(t), "close_timeout": 1.0,
		"dump_flight_recorder_every": 2, "dump_dir": dir,
	}}, nil)
	if res.Dumps < 1 || res.Dumps > 3 {
		t.Errorf("%d dumps for steps 0..4 every 2 steps, want 1 to 3", res.Dumps)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("reading %s: %v", dir, err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	want := res.Host + "_nccl_trace_rank_3"
	if len(names) != 1 || names[0] != want {
		t.Fatalf("dump directory holds %v, want only %s", names, want)
	}
	data, err := os.ReadFile(filepath.Join(dir, want))
	if err != nil {
		t.Fatalf("reading the dump: %v", err)
	}
	if string(data) != "\x80\x02fake flight recorder" {
		t.Errorf("dump holds %q, want what torch returned", data)
	}
}

// The worked example of docs/training-scripts.md is the formula's result.
func TestDocumentedExample(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "training-scripts.md"))
	if err != nil {
		t.Fatalf("reading docs/training-scripts.md: %v", err)
	}
	for _, attempt := range []int64{0, 1} {
		traceID, spanID, rootID := contractIDs("llama-70b", attempt, 18231, 1045)
		for _, id := range []string{traceID, spanID, rootID} {
			if !strings.Contains(string(doc), id) {
				t.Errorf("docs/training-scripts.md does not show %s (attempt %d of the worked example)", id, attempt)
			}
		}
	}
}
