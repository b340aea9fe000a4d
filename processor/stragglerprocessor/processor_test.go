package stragglerprocessor

import (
	"context"
	"crypto/sha256"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/goleak"

	"github.com/otelcol-gpu/otelcol-gpu/processor/stragglerprocessor/internal/metadata"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// rank describes one rank's step span.
type rank struct {
	job       string
	attempt   int64
	step      int64
	rank      int64
	worldSize int64
	ppStage   int64 // -1: none
	start     time.Time
	duration  time.Duration
	compute   time.Duration // split over the four phases; 0: no phase attributes
	wait      time.Duration // nccl.collectives.total_ns; 0: absent
}

func (r rank) traces() ptrace.Traces {
	td := ptrace.NewTraces()
	r.appendTo(td)
	return td
}

func (r rank) appendTo(td ptrace.Traces) {
	rs := td.ResourceSpans().AppendEmpty()
	res := rs.Resource().Attributes()
	res.PutStr("service.name", "train.py")
	res.PutStr("training.job.id", r.job)
	res.PutInt("training.attempt", r.attempt)
	res.PutInt("training.rank", r.rank)
	res.PutInt("training.world_size", r.worldSize)
	res.PutStr("host.name", "xl00"+strconv.FormatInt(r.rank/8, 10))
	res.PutStr("gpu.uuid", "GPU-"+strconv.FormatInt(r.rank, 10))
	if r.ppStage >= 0 {
		res.PutInt("training.pp_stage", r.ppStage)
	}
	span := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	span.SetName("train.step")
	span.SetStartTimestamp(pcommon.NewTimestampFromTime(r.start))
	span.SetEndTimestamp(pcommon.NewTimestampFromTime(r.start.Add(r.duration)))
	a := span.Attributes()
	a.PutInt("iteration.step", r.step)
	if r.compute > 0 {
		fwd, bwd, dl := r.compute*3/10, r.compute*6/10, r.compute/20
		a.PutInt("training.phase.dataload_ns", int64(dl))
		a.PutInt("training.phase.forward_ns", int64(fwd))
		a.PutInt("training.phase.backward_ns", int64(bwd))
		a.PutInt("training.phase.optimizer_ns", int64(r.compute-fwd-bwd-dl))
	}
	if r.wait > 0 {
		a.PutInt("nccl.collectives.total_ns", int64(r.wait))
		a.PutInt("nccl.collectives.max_ns", int64(r.wait/4))
	}
}

// clock is a settable time source.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

type harness struct {
	p     *stragglerProcessor
	sink  *consumertest.TracesSink
	clock *clock
	tel   *componenttest.Telemetry
}

func newHarness(t testing.TB, cfg *Config) *harness {
	return newHarnessTo(t, cfg, nil)
}

func newHarnessTo(t testing.TB, cfg *Config, next consumer.Traces) *harness {
	require.NoError(t, cfg.Validate())
	h := &harness{sink: &consumertest.TracesSink{}, clock: &clock{now: t0}, tel: componenttest.NewTelemetry()}
	t.Cleanup(func() { require.NoError(t, h.tel.Shutdown(context.Background())) })
	if next == nil {
		next = h.sink
	}
	set := processortest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = h.tel.NewTelemetrySettings()
	p, err := newStragglerProcessor(cfg, set, next)
	require.NoError(t, err)
	p.now = h.clock.Now
	h.p = p
	return h
}

func defaultConfig() *Config { return createDefaultConfig().(*Config) }

func (h *harness) send(t testing.TB, r rank) {
	require.NoError(t, h.p.ConsumeTraces(context.Background(), r.traces()))
}

// counter sums a telemetry counter's points, those with the given reason
// only when reason is not empty.
func (h *harness) counter(t *testing.T, name, reason string) int64 {
	m, err := h.tel.GetMetric(name)
	if err != nil {
		return 0
	}
	var n int64
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		if v, ok := dp.Attributes.Value(metadata.TelemetryAttrReason); reason == "" || (ok && v.AsString() == reason) {
			n += dp.Value
		}
	}
	return n
}

// sent is one span the sink received, with its resource.
type sent struct {
	span ptrace.Span
	res  pcommon.Map
}

func (h *harness) spans() []sent {
	var out []sent
	for _, td := range h.sink.AllTraces() {
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			rs := td.ResourceSpans().At(i)
			for j := 0; j < rs.ScopeSpans().Len(); j++ {
				for k := 0; k < rs.ScopeSpans().At(j).Spans().Len(); k++ {
					out = append(out, sent{span: rs.ScopeSpans().At(j).Spans().At(k), res: rs.Resource().Attributes()})
				}
			}
		}
	}
	return out
}

func (h *harness) roots() map[int64]sent {
	out := map[int64]sent{}
	for _, s := range h.spans() {
		if s.span.Name() == "train.step.root" {
			step := intOf(s.span.Attributes(), "iteration.step")
			if _, dup := out[step]; dup {
				panic("two roots for step " + strconv.FormatInt(step, 10))
			}
			out[step] = s
		}
	}
	return out
}

// verdicts maps step -> rank -> straggler.verdict of the rank spans sent.
func (h *harness) verdicts() map[int64]map[int64]string {
	out := map[int64]map[int64]string{}
	for _, s := range h.spans() {
		if s.span.Name() != "train.step" {
			continue
		}
		step := intOf(s.span.Attributes(), "iteration.step")
		if out[step] == nil {
			out[step] = map[int64]string{}
		}
		v, _ := s.span.Attributes().Get("straggler.verdict")
		out[step][intOf(s.res, "training.rank")] = v.AsString()
	}
	return out
}

func intOf(m pcommon.Map, key string) int64 {
	v, _ := m.Get(key)
	return v.Int()
}

// contractIDs computes the root's ids from docs/training-scripts.md,
// independently of internal/stepid.
func contractIDs(job string, attempt, step int64) (pcommon.TraceID, pcommon.SpanID) {
	prefix := job + "\x00" + strconv.FormatInt(attempt, 10) + "\x00" + strconv.FormatInt(step, 10)
	tsum := sha256.Sum256([]byte(prefix))
	ssum := sha256.Sum256([]byte(prefix + "\x00root"))
	return pcommon.TraceID(tsum[:16]), pcommon.SpanID(ssum[:8])
}

// healthyCompute is rank r's compute time: 1 s plus a fixed per-rank spread.
func healthyCompute(r int64) time.Duration { return time.Second + time.Duration(r)*3*time.Millisecond }

func TestComputeStragglerOpensVerdictAndRootPerStep(t *testing.T) {
	h := newHarness(t, defaultConfig())
	const job, attempt = "llama-70b", int64(2)
	stepDur := 2500 * time.Millisecond
	for step := int64(1); step <= 4; step++ {
		start := t0.Add(time.Duration(step) * 3 * time.Second)
		var computes []time.Duration
		for r := int64(0); r < 8; r++ {
			c := healthyCompute(r)
			if r == 5 {
				c = 2300 * time.Millisecond
			}
			computes = append(computes, c)
			// ranks start a few ms apart: the root spans them all
			h.send(t, rank{job: job, attempt: attempt, step: step, rank: r, worldSize: 8, ppStage: -1,
				start: start.Add(time.Duration(r) * time.Millisecond), duration: stepDur, compute: c, wait: stepDur - c})
		}
		// decided on the eighth rank, without waiting
		roots := h.roots()
		require.Contains(t, roots, step, "step %d decided once world_size ranks reported", step)
		root := roots[step]
		traceID, spanID := contractIDs(job, attempt, step)
		assert.Equal(t, traceID, root.span.TraceID())
		assert.Equal(t, spanID, root.span.SpanID())
		assert.True(t, root.span.ParentSpanID().IsEmpty())
		assert.Equal(t, pcommon.NewTimestampFromTime(start), root.span.StartTimestamp())
		assert.Equal(t, pcommon.NewTimestampFromTime(start.Add(7*time.Millisecond+stepDur)), root.span.EndTimestamp())
		a := root.span.Attributes()
		var sum time.Duration
		for _, c := range computes {
			sum += c
		}
		slices.Sort(computes)
		assert.Equal(t, int64(sum/8), intOf(a, "step.mean_ns"))
		assert.Equal(t, int64((computes[3]+computes[4])/2), intOf(a, "step.median_ns"))
		assert.Equal(t, int64(2300*time.Millisecond), intOf(a, "step.p99_ns"), "nearest rank: ceil(0.99*8) = 8th")
		assert.Equal(t, int64(2300*time.Millisecond), intOf(a, "step.max_ns"))
		assert.Equal(t, int64(5), intOf(a, "step.slowest_rank"))
		assert.Equal(t, int64(8), intOf(a, "step.ranks_reported"))
		assert.Equal(t, int64(8), intOf(a, "training.world_size"))
		assert.Equal(t, step, intOf(a, "iteration.step"))
		jobID, _ := a.Get("training.job.id")
		assert.Equal(t, job, jobID.Str())
		slow, _ := a.Get("step.slow")
		assert.False(t, slow.Bool())
		svc, _ := root.res.Get("service.name")
		assert.Equal(t, "otelcol-gpu-gateway", svc.Str())
		resJob, _ := root.res.Get("training.job.id")
		assert.Equal(t, job, resJob.Str())
	}
	v := h.verdicts()
	for step := int64(1); step <= 4; step++ {
		want := "flagged"
		if step >= 3 {
			want = "straggler.compute" // 3 of the last 5 steps
		}
		assert.Equal(t, want, v[step][5], "rank 5 at step %d", step)
		for r := int64(0); r < 8; r++ {
			if r != 5 {
				assert.Equal(t, "none", v[step][r], "rank %d at step %d", r, step)
			}
		}
	}
	for _, s := range h.spans() {
		if s.span.Name() == "train.step" {
			score, ok := s.span.Attributes().Get("straggler.score")
			require.True(t, ok)
			if intOf(s.res, "training.rank") == 5 {
				assert.Greater(t, score.Double(), 3.5)
			} else {
				assert.Less(t, score.Double(), 3.5)
			}
		}
	}
	assert.Len(t, h.roots(), 4, "one root per step")
	assert.Equal(t, int64(4), h.counter(t, "otelcol_processor_straggler_steps_decided", ""))
}

func TestSlowLinkVerdict(t *testing.T) {
	h := newHarness(t, defaultConfig())
	for step := int64(1); step <= 3; step++ {
		for r := int64(0); r < 8; r++ {
			wait := 200 * time.Millisecond
			if r == 2 || r == 3 {
				wait = 900 * time.Millisecond // one communicator's transfers are slow, compute is normal
			}
			h.send(t, rank{job: "j", step: step, rank: r, worldSize: 8, ppStage: -1, start: t0, duration: 2 * time.Second, compute: healthyCompute(r), wait: wait})
		}
	}
	v := h.verdicts()
	assert.Equal(t, "flagged", v[1][2])
	assert.Equal(t, "straggler.link", v[3][2])
	assert.Equal(t, "straggler.link", v[3][3])
	assert.Equal(t, "none", v[3][0])
}

// jittered is a healthy job's compute: ±3% per rank and step.
func jittered(rng *rand.Rand) time.Duration {
	return time.Duration(float64(time.Second) * (0.97 + 0.06*rng.Float64()))
}

func TestHealthyJobIsNone(t *testing.T) {
	h := newHarness(t, defaultConfig())
	rng := rand.New(rand.NewPCG(1, 2))
	for step := int64(0); step < 20; step++ {
		for r := int64(0); r < 8; r++ {
			c := jittered(rng)
			h.send(t, rank{job: "j", step: step, rank: r, worldSize: 8, ppStage: -1,
				start: t0.Add(time.Duration(step) * 2 * time.Second), duration: 1500 * time.Millisecond, compute: c, wait: 1500*time.Millisecond - c})
		}
	}
	v := h.verdicts()
	require.Len(t, v, 20)
	for step, ranks := range v {
		require.Len(t, ranks, 8)
		for r, verdict := range ranks {
			assert.Equal(t, "none", verdict, "rank %d step %d", r, step)
		}
	}
	for step, root := range h.roots() {
		slow, _ := root.span.Attributes().Get("step.slow")
		assert.False(t, slow.Bool(), "step %d", step)
		assert.Equal(t, int64(0), intOf(root.span.Attributes(), "straggler.flagged_ranks"))
	}
}

func TestSlowStepOnAllRanks(t *testing.T) {
	h := newHarness(t, defaultConfig())
	rng := rand.New(rand.NewPCG(3, 4))
	for step := int64(0); step < 7; step++ {
		scale := time.Duration(1)
		if step == 6 {
			scale = 4 // a checkpoint: every rank is 4x slower
		}
		for r := int64(0); r < 8; r++ {
			c := jittered(rng) * scale
			h.send(t, rank{job: "j", step: step, rank: r, worldSize: 8, ppStage: -1,
				start: t0.Add(time.Duration(step) * 10 * time.Second), duration: 1500 * time.Millisecond * scale, compute: c, wait: 1500*time.Millisecond*scale - c})
		}
	}
	roots := h.roots()
	for step := int64(0); step < 7; step++ {
		slow, ok := roots[step].span.Attributes().Get("step.slow")
		require.True(t, ok)
		assert.Equal(t, step == 6, slow.Bool(), "step %d", step)
	}
	for step, ranks := range h.verdicts() {
		for r, verdict := range ranks {
			assert.Equal(t, "none", verdict, "rank %d step %d", r, step)
		}
	}
}

func TestDecisionByTimeoutWithFewerRanks(t *testing.T) {
	h := newHarness(t, defaultConfig())
	for r := int64(0); r < 5; r++ {
		h.send(t, rank{job: "j", step: 9, rank: r, worldSize: 8, ppStage: -1, start: t0, duration: time.Second, compute: healthyCompute(r)})
	}
	h.clock.advance(2900 * time.Millisecond)
	h.p.flush(context.Background(), false)
	assert.Empty(t, h.spans(), "held until decision_wait")
	h.clock.advance(100 * time.Millisecond)
	h.p.flush(context.Background(), false)
	roots := h.roots()
	require.Contains(t, roots, int64(9))
	a := roots[9].span.Attributes()
	assert.Equal(t, int64(5), intOf(a, "step.ranks_reported"))
	assert.Equal(t, int64(8), intOf(a, "training.world_size"))
	assert.Len(t, h.verdicts()[9], 5)
	assert.Zero(t, h.p.live)
	assert.Zero(t, h.p.held)
}

func TestLateSpanPassesThroughAndIsCounted(t *testing.T) {
	h := newHarness(t, defaultConfig())
	for r := int64(0); r < 4; r++ {
		h.send(t, rank{job: "j", step: 1, rank: r, worldSize: 4, ppStage: -1, start: t0, duration: time.Second, compute: healthyCompute(r)})
	}
	require.Len(t, h.spans(), 5)
	late := rank{job: "j", step: 1, rank: 3, worldSize: 4, ppStage: -1, start: t0, duration: time.Second, compute: healthyCompute(3)}.traces()
	// a forged verdict from a training pod is not ours to pass on
	late.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().PutStr("straggler.verdict", "straggler.compute")
	require.NoError(t, h.p.ConsumeTraces(context.Background(), late))
	all := h.spans()
	require.Len(t, all, 6, "passed on at once")
	last := all[5].span
	assert.Equal(t, "train.step", last.Name())
	_, annotated := last.Attributes().Get("straggler.verdict")
	assert.False(t, annotated)
	_, scored := last.Attributes().Get("straggler.score")
	assert.False(t, scored)
	assert.Zero(t, h.p.held, "never buffered")
	assert.Equal(t, int64(1), h.counter(t, "otelcol_processor_straggler_late_spans", ""))
	h.p.flush(context.Background(), true)
	assert.Len(t, h.roots(), 1, "no second root")
}

func TestDuplicateRankIsNotJudgedTwice(t *testing.T) {
	h := newHarness(t, defaultConfig())
	r := rank{job: "j", step: 1, rank: 0, worldSize: 4, ppStage: -1, start: t0, duration: time.Second, compute: time.Second}
	h.send(t, r)
	h.send(t, r)
	assert.Len(t, h.spans(), 1, "the repeat passes on")
	assert.Equal(t, 1, h.p.held)
	assert.Equal(t, int64(1), h.counter(t, "otelcol_processor_straggler_unjudged_spans", "duplicate_rank"))
}

func TestPipelineStagesAreComparedWithinTheirGroup(t *testing.T) {
	// stage 0: six ranks at 1 s; stage 1: three ranks at 2 s, rank 8 of
	// them at 4.6 s (2.3x its stage).
	compute := func(r int64) time.Duration {
		switch {
		case r < 6:
			return healthyCompute(r)
		case r == 8:
			return 4600 * time.Millisecond
		default:
			return 2*time.Second + time.Duration(r)*time.Millisecond
		}
	}
	run := func(withStages bool) map[int64]map[int64]string {
		h := newHarness(t, defaultConfig())
		for step := int64(0); step < 3; step++ {
			for r := int64(0); r < 9; r++ {
				stage := int64(-1)
				if withStages {
					stage = r / 6
				}
				h.send(t, rank{job: "pp", step: step, rank: r, worldSize: 9, ppStage: stage, start: t0, duration: 5 * time.Second, compute: compute(r)})
			}
		}
		return h.verdicts()
	}
	grouped := run(true)
	for r := int64(0); r < 8; r++ {
		assert.Equal(t, "none", grouped[2][r], "rank %d: its stage is legitimately slower", r)
	}
	assert.Equal(t, "straggler.compute", grouped[2][8])

	// The control: without stages the slower stage itself is flagged.
	flat := run(false)
	assert.Equal(t, "straggler.compute", flat[2][6])
	assert.Equal(t, "straggler.compute", flat[2][7])
}

func TestNonStepSpansPassAtOnce(t *testing.T) {
	h := newHarness(t, defaultConfig())
	td := ptrace.NewTraces()
	other := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	other.SetName("nccl:all_reduce")
	other.Attributes().PutStr("straggler.verdict", "kept: not a step span")
	noRank := rank{job: "j", step: 1, rank: 0, worldSize: 2, ppStage: -1, start: t0, duration: time.Second}.traces()
	noRank.ResourceSpans().At(0).Resource().Attributes().Remove("training.rank")
	noRank.ResourceSpans().MoveAndAppendTo(td.ResourceSpans())
	require.NoError(t, h.p.ConsumeTraces(context.Background(), td))
	all := h.spans()
	require.Len(t, all, 2)
	v, _ := all[0].span.Attributes().Get("straggler.verdict")
	assert.Equal(t, "kept: not a step span", v.Str())
	assert.Equal(t, "train.step", all[1].span.Name())
	assert.Zero(t, h.p.live)
}

// countingSink counts spans and keeps nothing.
type countingSink struct {
	mu    sync.Mutex
	spans int
	roots int
}

func (c *countingSink) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func (c *countingSink) ConsumeTraces(_ context.Context, td ptrace.Traces) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.spans += td.SpanCount()
	for i := 0; i < td.ResourceSpans().Len(); i++ {
		if td.ResourceSpans().At(i).ScopeSpans().At(0).Spans().At(0).Name() == "train.step.root" {
			c.roots++
		}
	}
	return nil
}

func TestBoundsUnderGarbage(t *testing.T) {
	cfg := defaultConfig()
	sink := &countingSink{}
	h := newHarnessTo(t, cfg, sink)
	rng := rand.New(rand.NewPCG(5, 6))
	ctx := context.Background()
	const spans, perBatch = 1_000_000, 10_000
	for sent := 0; sent < spans; sent += perBatch {
		td := ptrace.NewTraces()
		for i := 0; i < perBatch; i++ {
			// a million distinct step numbers of one job, world size huge:
			// half climb (each opens a step), half are anywhere
			step := int64(sent+i)<<20 | rng.Int64N(1<<20)
			if i%2 == 1 {
				step = int64(rng.Uint64() >> 1)
			}
			rank{job: "garbage", step: step, rank: int64(rng.IntN(1 << 20)), worldSize: math.MaxInt32, ppStage: -1,
				start: t0, duration: time.Second}.appendTo(td)
		}
		require.NoError(t, h.p.ConsumeTraces(ctx, td))
		h.assertBounded(t)
	}
	// and many jobs
	for i := 0; i < 10_000; i++ {
		h.send(t, rank{job: "job-" + strconv.Itoa(i), step: 1, rank: 0, worldSize: 8, ppStage: -1, start: t0, duration: time.Second})
	}
	h.assertBounded(t)
	assert.LessOrEqual(t, len(h.p.jobs), cfg.MaxJobs)
	assert.Positive(t, h.counter(t, "otelcol_processor_straggler_forced_decisions", "max_open_steps_per_job"))
	assert.Positive(t, h.counter(t, "otelcol_processor_straggler_forced_decisions", "max_jobs"))

	h.p.flush(ctx, true)
	// every span came out exactly once, plus one root per decided step
	late := h.counter(t, "otelcol_processor_straggler_late_spans", "")
	unjudged := h.counter(t, "otelcol_processor_straggler_unjudged_spans", "")
	decided := h.counter(t, "otelcol_processor_straggler_steps_decided", "")
	assert.Equal(t, int(decided), sink.roots)
	t.Logf("garbage: %d decided, %d late, %d unjudged", decided, late, unjudged)
	assert.Equal(t, spans+10_000+sink.roots, sink.spans, "late %d unjudged %d", late, unjudged)
	assert.Zero(t, h.p.held)
}

func (h *harness) assertBounded(t *testing.T) {
	p := h.p
	require.LessOrEqual(t, len(p.jobs), p.cfg.MaxJobs)
	require.LessOrEqual(t, p.held, p.cfg.MaxHeldSpans)
	require.LessOrEqual(t, len(p.arrivals), 2*p.live+1024)
	open := 0
	for _, js := range p.jobs {
		require.LessOrEqual(t, len(js.open), p.cfg.MaxOpenStepsPerJob)
		require.LessOrEqual(t, len(js.decided), cap(js.decidedOrder))
		require.LessOrEqual(t, len(js.durations), p.cfg.SlowStepWindow)
		open += len(js.open)
	}
	require.Equal(t, p.live, open)
}

func TestMaxHeldSpansDecidesTheOldestStep(t *testing.T) {
	cfg := defaultConfig()
	cfg.MaxHeldSpans = 6
	h := newHarness(t, cfg)
	for step := int64(0); step < 3; step++ {
		for r := int64(0); r < 3; r++ {
			h.send(t, rank{job: "j", step: step, rank: r, worldSize: 8, ppStage: -1, start: t0, duration: time.Second, compute: time.Second})
		}
	}
	roots := h.roots()
	require.Len(t, roots, 1)
	assert.Contains(t, roots, int64(0))
	assert.Equal(t, 6, h.p.held)
	assert.Equal(t, int64(1), h.counter(t, "otelcol_processor_straggler_forced_decisions", "max_held_spans"))
}

func TestMaxRanksPerStep(t *testing.T) {
	cfg := defaultConfig()
	cfg.MaxRanksPerStep = 2
	h := newHarness(t, cfg)
	for r := int64(0); r < 3; r++ {
		h.send(t, rank{job: "j", step: 0, rank: r, worldSize: 8, ppStage: -1, start: t0, duration: time.Second})
	}
	assert.Len(t, h.spans(), 1, "the third rank passes on")
	assert.Equal(t, int64(1), h.counter(t, "otelcol_processor_straggler_unjudged_spans", "max_ranks_per_step"))
}

func TestNewAttemptStartsFresh(t *testing.T) {
	h := newHarness(t, defaultConfig())
	for attempt := int64(0); attempt < 2; attempt++ {
		for r := int64(0); r < 2; r++ {
			h.send(t, rank{job: "j", attempt: attempt, step: 7, rank: r, worldSize: 2, ppStage: -1, start: t0, duration: time.Second})
		}
	}
	var ids []pcommon.TraceID
	for _, s := range h.spans() {
		if s.span.Name() == "train.step.root" {
			ids = append(ids, s.span.TraceID())
		}
	}
	require.Len(t, ids, 2, "the replayed step is not late: it belongs to the new attempt")
	assert.NotEqual(t, ids[0], ids[1])
}

func TestShutdownFlushesOpenSteps(t *testing.T) {
	cfg := defaultConfig()
	cfg.DecisionWait = time.Hour
	h := newHarness(t, cfg)
	require.NoError(t, h.p.Start(context.Background(), componenttest.NewNopHost()))
	for r := int64(0); r < 3; r++ {
		h.send(t, rank{job: "j", step: 1, rank: r, worldSize: 8, ppStage: -1, start: t0, duration: time.Second})
	}
	assert.Empty(t, h.spans())
	require.NoError(t, h.p.Shutdown(context.Background()))
	assert.Len(t, h.spans(), 4)
	assert.Len(t, h.roots(), 1)
}

func TestBackgroundFlushDecidesAfterWait(t *testing.T) {
	cfg := defaultConfig()
	cfg.DecisionWait = 20 * time.Millisecond
	h := newHarness(t, cfg)
	h.p.now = time.Now
	require.NoError(t, h.p.Start(context.Background(), componenttest.NewNopHost()))
	defer func() { require.NoError(t, h.p.Shutdown(context.Background())) }()
	h.send(t, rank{job: "j", step: 1, rank: 0, worldSize: 8, ppStage: -1, start: t0, duration: time.Second})
	require.Eventually(t, func() bool { return h.sink.SpanCount() == 2 }, 5*time.Second, 5*time.Millisecond)
}
