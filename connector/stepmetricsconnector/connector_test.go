package stepmetricsconnector

import (
	"context"
	"errors"
	"math"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/connector/connectortest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-gpu/otelcol-gpu/connector/stepmetricsconnector/internal/metadata"
)

var t0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// rankStep is one rank's train.step span as a script following
// docs/training-scripts.md sends it. Nil optional values are left out.
type rankStep struct {
	job        string
	attempt    int64
	step, rank int64
	world      int64
	start      time.Time
	dur        time.Duration
	model      string
	tokens     any
	dataloadNs any
	flops      any
}

func (r rankStep) appendTo(td ptrace.Traces) ptrace.Span {
	rs := td.ResourceSpans().AppendEmpty()
	res := rs.Resource().Attributes()
	res.PutStr("service.name", "trainer")
	res.PutStr("training.job.id", r.job)
	res.PutInt("training.attempt", r.attempt)
	res.PutInt("training.rank", r.rank)
	res.PutInt("training.local_rank", r.rank%8)
	if r.world > 0 {
		res.PutInt("training.world_size", r.world)
	}
	res.PutStr("host.name", "xl00"+string(rune('0'+r.rank/8%10)))
	res.PutStr("gpu.uuid", "GPU-0000")
	if r.model != "" {
		res.PutStr("gpu.model", r.model)
	}
	span := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	span.SetName("train.step")
	span.SetStartTimestamp(pcommon.NewTimestampFromTime(r.start))
	span.SetEndTimestamp(pcommon.NewTimestampFromTime(r.start.Add(r.dur)))
	a := span.Attributes()
	a.PutInt("iteration.step", r.step)
	a.PutInt("training.phase.forward_ns", int64(r.dur)/4)
	a.PutInt("training.phase.backward_ns", int64(r.dur)/2)
	a.PutInt("training.phase.optimizer_ns", int64(r.dur)/20)
	a.PutDouble("training.loss", math.NaN()) // a signal, never a metric here
	for _, kv := range []struct {
		key string
		val any
	}{{attrTokens, r.tokens}, {attrDataloadNs, r.dataloadNs}, {attrFlops, r.flops}} {
		if kv.val != nil {
			_ = a.PutEmpty(kv.key).FromRaw(kv.val) // the types used here are all supported
		}
	}
	return span
}

func traces(steps ...rankStep) ptrace.Traces {
	td := ptrace.NewTraces()
	for _, s := range steps {
		s.appendTo(td)
	}
	return td
}

// fixture is a connector with a fake clock and a sink.
type fixture struct {
	c    *stepMetrics
	sink *consumertest.MetricsSink
	tel  *componenttest.Telemetry
	now  time.Time
	logs *observer.ObservedLogs
}

func newFixture(t testing.TB, cfg *Config) *fixture {
	f := &fixture{sink: &consumertest.MetricsSink{}, tel: componenttest.NewTelemetry(), now: t0}
	set := connectortest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = f.tel.NewTelemetrySettings()
	core, logs := observer.New(zapcore.DebugLevel)
	set.Logger = zap.New(core)
	f.logs = logs
	c, err := newStepMetrics(cfg, set, f.sink)
	require.NoError(t, err)
	c.now = func() time.Time { return f.now }
	f.c = c
	t.Cleanup(func() { require.NoError(t, f.tel.Shutdown(context.Background())) })
	return f
}

func (f *fixture) consume(t testing.TB, td ptrace.Traces) {
	require.NoError(t, f.c.ConsumeTraces(context.Background(), td))
}

// emit emits at the fixture's time and returns what was sent (empty
// metrics when nothing).
func (f *fixture) emit(final bool) pmetric.Metrics {
	f.sink.Reset()
	f.c.emit(context.Background(), final)
	if all := f.sink.AllMetrics(); len(all) > 0 {
		return all[0]
	}
	return pmetric.NewMetrics()
}

// counter returns the telemetry counter's value for the attributes given
// as key, value pairs (0 when never added).
func (f *fixture) counter(t *testing.T, name string, kv ...string) int64 {
	m, err := f.tel.GetMetric(name)
	if err != nil {
		return 0
	}
	sum, ok := m.Data.(metricdata.Sum[int64])
	require.True(t, ok, name)
	var total int64
	for _, dp := range sum.DataPoints {
		match := true
		for i := 0; i+1 < len(kv); i += 2 {
			v, ok := dp.Attributes.Value(attribute.Key(kv[i]))
			match = match && ok && v.AsString() == kv[i+1]
		}
		if match {
			total += dp.Value
		}
	}
	return total
}

func TestOtherSpansIgnored(t *testing.T) {
	f := newFixture(t, createDefaultConfig().(*Config))
	td := ptrace.NewTraces()
	span := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	span.SetName("nccl:all_reduce")
	span.Attributes().PutStr("training.job.id", "llama-70b")
	f.consume(t, td)
	assert.Zero(t, f.emit(false).DataPointCount())
	assert.Zero(t, f.counter(t, "otelcol_stepmetrics_spans_dropped"), "other spans are not drops")
	assert.Equal(t, 1, td.SpanCount(), "the input is not mutated")
}

// The ticker emits every interval, and Shutdown emits what remains.
func TestIntervalAndShutdownEmission(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.Interval = 20 * time.Millisecond
	sink := &consumertest.MetricsSink{}
	c, err := NewFactory().CreateTracesToMetrics(context.Background(), connectortest.NewNopSettings(metadata.Type), cfg, sink)
	require.NoError(t, err)
	require.NoError(t, c.Start(context.Background(), componenttest.NewNopHost()))
	now := time.Now()
	td := traces(
		rankStep{job: "j", step: 1, rank: 0, world: 2, start: now.Add(-time.Second), dur: time.Second},
		rankStep{job: "j", step: 1, rank: 1, world: 2, start: now.Add(-time.Second), dur: time.Second},
	)
	require.NoError(t, c.ConsumeTraces(context.Background(), td))
	require.Eventually(t, func() bool { return sink.DataPointCount() > 0 }, 5*time.Second, 5*time.Millisecond)
	assert.Equal(t, "training.step.duration", sink.AllMetrics()[0].ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Name())

	// A step still waiting for its second rank closes at shutdown.
	require.NoError(t, c.ConsumeTraces(context.Background(), traces(
		rankStep{job: "j", step: 2, rank: 0, world: 2, start: now, dur: 3 * time.Second})))
	require.NoError(t, c.Shutdown(context.Background()))
	last := sink.AllMetrics()[len(sink.AllMetrics())-1]
	dp := last.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Histogram().DataPoints().At(0)
	assert.Equal(t, uint64(2), dp.Count())
	assert.InDelta(t, 4.0, dp.Sum(), 1e-9)
}

func TestShutdownWithoutStart(t *testing.T) {
	f := newFixture(t, createDefaultConfig().(*Config))
	f.consume(t, traces(rankStep{job: "j", step: 1, rank: 0, world: 2, start: t0, dur: time.Second}))
	require.NoError(t, f.c.Shutdown(context.Background()))
	assert.Equal(t, 1, f.sink.DataPointCount())
	assert.Equal(t, int64(1), f.counter(t, "otelcol_stepmetrics_steps_closed", "reason", "shutdown"))
}

func TestCancelledContext(t *testing.T) {
	f := newFixture(t, createDefaultConfig().(*Config))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := f.c.ConsumeTraces(ctx, traces(rankStep{job: "j", step: 1, rank: 0, world: 1, start: t0, dur: time.Second}))
	assert.ErrorIs(t, err, context.Canceled)
	assert.ErrorContains(t, err, "stepmetricsconnector: consuming traces")
}

// blocking is a next consumer that accepts nothing until its context
// ends: the remote-write exporter retrying while Prometheus is down.
type blocking struct{ calls, withDeadline int }

func (*blocking) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }
func (b *blocking) ConsumeMetrics(ctx context.Context, _ pmetric.Metrics) error {
	b.calls++
	if _, ok := ctx.Deadline(); ok {
		b.withDeadline++
	}
	<-ctx.Done()
	return ctx.Err()
}

// Shutdown's final emission into a consumer that never accepts ends at the
// loop's bound (the collector's own context never ends), and is logged
// with what was lost.
func TestShutdownWithTheBackendDown(t *testing.T) {
	f := newFixture(t, createDefaultConfig().(*Config))
	next := &blocking{}
	f.c.next = next
	f.c.loop.FinalFlushTimeout = 10 * time.Millisecond
	require.NoError(t, f.c.Start(context.Background(), componenttest.NewNopHost()))
	f.consume(t, traces(rankStep{job: "j", step: 1, rank: 0, world: 2, start: t0, dur: time.Second}))
	require.NoError(t, f.c.Shutdown(context.Background()))
	assert.Equal(t, 1, next.calls, "the final emission")
	assert.Equal(t, 1, next.withDeadline, "the final emission's context has no deadline")
	logged := f.logs.FilterMessage("stepmetricsconnector: emitting: metrics refused downstream").All()
	require.Len(t, logged, 1)
	assert.Equal(t, context.DeadlineExceeded.Error(), logged[0].ContextMap()["error"])
	assert.EqualValues(t, 1, logged[0].ContextMap()["data_points"])
}

type refusing struct{}

func (refusing) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }
func (refusing) ConsumeMetrics(context.Context, pmetric.Metrics) error {
	return errors.New("queue full")
}

func TestDownstreamRefusalLogged(t *testing.T) {
	f := newFixture(t, createDefaultConfig().(*Config))
	f.c.next = refusing{}
	f.consume(t, traces(rankStep{job: "j", step: 1, rank: 0, world: 1, start: t0, dur: time.Second}))
	f.c.emit(context.Background(), false)
	logged := f.logs.FilterMessage("stepmetricsconnector: emitting: metrics refused downstream").All()
	require.Len(t, logged, 1)
	assert.Equal(t, "queue full", logged[0].ContextMap()["error"])
}

// Garbage is dropped or skipped, counted by reason, and logged.
func TestGarbageCounted(t *testing.T) {
	f := newFixture(t, createDefaultConfig().(*Config))
	ok := rankStep{job: "j", step: 1, rank: 0, world: 4, start: t0, dur: time.Second, model: "NVIDIA H100 80GB HBM3"}
	td := traces(ok)
	bad := ok
	bad.rank = 1
	bad.dur = -time.Second
	bad.appendTo(td) // invalid_duration
	bad = ok
	bad.rank = 4
	bad.appendTo(td) // rank_out_of_range: world size 4
	bad = ok
	bad.appendTo(td) // duplicate_rank
	bad = ok
	bad.job = ""
	bad.appendTo(td) // missing_identity
	garbage := ok
	garbage.rank = 2
	garbage.tokens = math.NaN()
	garbage.dataloadNs = "100ms"
	garbage.flops = -1.0
	garbage.appendTo(td)
	unknown := ok
	unknown.rank = 3
	unknown.model = "Tesla V100-SXM2-32GB"
	unknown.flops = int64(1e12)
	unknown.appendTo(td)
	last := ok
	last.rank = 1
	last.appendTo(td) // the 4th rank: the step closes
	f.consume(t, td)
	f.consume(t, traces(ok)) // late: step 1 closed when its 4th rank arrived

	md := f.emit(false)
	assertAllFinite(t, md)
	assert.Equal(t, 1, md.DataPointCount(), "the histogram only: no gauge had a valid input")
	for reason, want := range map[string]int64{
		"invalid_duration": 1, "rank_out_of_range": 1, "duplicate_rank": 1, "missing_identity": 1, "late": 1,
	} {
		assert.Equal(t, want, f.counter(t, "otelcol_stepmetrics_spans_dropped", "reason", reason), reason)
	}
	for _, kv := range [][3]string{
		{attrTokens, skipNotFinite}, {attrDataloadNs, skipNotNumeric}, {attrFlops, skipNegative}, {"gpu.model", skipUnknown},
	} {
		assert.Equal(t, int64(1), f.counter(t, "otelcol_stepmetrics_attributes_skipped", "attribute", kv[0], "reason", kv[1]), kv)
	}
	assert.Equal(t, int64(1), f.counter(t, "otelcol_stepmetrics_steps_closed", "reason", "complete"))
	warned := f.logs.FilterMessage("stepmetricsconnector: train.step spans dropped in the interval").All()
	require.Len(t, warned, 1)
	assert.Equal(t, int64(1), warned[0].ContextMap()["late"])

	// Counts are per interval: the next emission reports nothing new.
	f.emit(false)
	assert.Len(t, f.logs.FilterMessage("stepmetricsconnector: train.step spans dropped in the interval").All(), 1)
	assert.Equal(t, int64(1), f.counter(t, "otelcol_stepmetrics_spans_dropped", "reason", "late"))
}

// Concurrent producers and emissions (run with -race).
func TestConcurrentConsumeAndEmit(t *testing.T) {
	f := newFixture(t, createDefaultConfig().(*Config))
	var wg sync.WaitGroup
	for rank := int64(0); rank < 8; rank++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for step := int64(0); step < 50; step++ {
				assert.NoError(t, f.c.ConsumeTraces(context.Background(), traces(
					rankStep{job: "j", step: step, rank: rank, world: 8, start: t0, dur: time.Second, tokens: int64(10)})))
			}
		}()
	}
	for i := 0; i < 20; i++ {
		f.c.emit(context.Background(), false)
	}
	wg.Wait()
	require.Contains(t, f.c.jobs, jobKey{job: "j"})
	assert.Equal(t, uint64(50), f.c.jobs[jobKey{job: "j"}].hist.count, "every step counted once, whatever the interleaving")
	assert.Empty(t, f.c.jobs[jobKey{job: "j"}].open)
}

// assertAllFinite fails when any value sent is NaN or Inf.
func assertAllFinite(t testing.TB, md pmetric.Metrics) {
	t.Helper()
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		sms := rms.At(i).ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			ms := sms.At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				m := ms.At(k)
				switch m.Type() {
				case pmetric.MetricTypeGauge:
					for p := 0; p < m.Gauge().DataPoints().Len(); p++ {
						v := m.Gauge().DataPoints().At(p).DoubleValue()
						if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
							t.Errorf("%s = %g", m.Name(), v)
						}
					}
				case pmetric.MetricTypeHistogram:
					for p := 0; p < m.Histogram().DataPoints().Len(); p++ {
						dp := m.Histogram().DataPoints().At(p)
						for _, v := range []float64{dp.Sum(), dp.Min(), dp.Max()} {
							if math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
								t.Errorf("%s: sum/min/max %g", m.Name(), v)
							}
						}
					}
				default:
					t.Errorf("unexpected metric type %s", m.Type())
				}
			}
		}
	}
}

// FuzzConsumeTraces feeds arbitrary OTLP traces: nothing may panic, and
// nothing sent may be NaN, Inf or negative. Seeds: the golden input and
// the Alibaba replay.
func FuzzConsumeTraces(f *testing.F) {
	marshaler := &ptrace.ProtoMarshaler{}
	for _, td := range []ptrace.Traces{goldenInput(f), alibabaTraces(f, 3)} {
		b, err := marshaler.MarshalTraces(td)
		require.NoError(f, err)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		td, err := (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(data)
		if err != nil {
			return
		}
		cfg := createDefaultConfig().(*Config)
		cfg.MaxJobs, cfg.MaxOpenSteps = 4, 4
		fx := newFixture(t, cfg)
		fx.consume(t, td)
		assertAllFinite(t, fx.emit(false))
		fx.now = fx.now.Add(time.Hour)
		assertAllFinite(t, fx.emit(true))
		assert.LessOrEqual(t, len(fx.c.jobs), 4)
	})
}

// BenchmarkRankSteps pushes rank-step spans through the connector, 8 ranks
// per batch as one node's agent sends them, with an emission every 1,024
// batches. One op is one span.
func BenchmarkRankSteps(b *testing.B) {
	f := newFixture(b, createDefaultConfig().(*Config))
	const steps = 1024
	batches := make([]ptrace.Traces, 0, steps)
	for step := int64(0); step < steps; step++ {
		td := ptrace.NewTraces()
		for rank := int64(0); rank < 8; rank++ {
			rankStep{job: "llama-70b", step: step, rank: rank, world: 8, start: t0, dur: 2 * time.Second,
				model: "NVIDIA H100 80GB HBM3", tokens: int64(16384), dataloadNs: int64(1e8), flops: 7.9e14}.appendTo(td)
		}
		batches = append(batches, td)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for attempt := int64(0); n < b.N; attempt++ {
		// A new attempt each round: its steps are new, not late. The
		// previous attempt expires at the emission that ends the round.
		for _, td := range batches {
			for i := 0; i < td.ResourceSpans().Len(); i++ {
				td.ResourceSpans().At(i).Resource().Attributes().PutInt("training.attempt", attempt)
			}
			_ = f.c.ConsumeTraces(ctx, td)
			n += 8
			if n >= b.N {
				break
			}
		}
		f.now = f.now.Add(time.Hour)
		f.c.emit(ctx, false)
	}
	b.StopTimer()
	require.LessOrEqual(b, len(f.c.jobs), 1, "attempts expire: the benchmark never hits max_jobs")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "spans/s")
}

// BenchmarkMemoryPerJob reports the heap held per job attempt with one
// open step of 16,384 ranks (its rank bitset is 2 KiB) after one rank of
// it arrived. One op is one job attempt.
func BenchmarkMemoryPerJob(b *testing.B) {
	cfg := createDefaultConfig().(*Config)
	cfg.MaxJobs = b.N + 1
	f := newFixture(b, cfg)
	batches := make([]ptrace.Traces, b.N)
	for i := range batches {
		batches[i] = traces(rankStep{job: "job-" + strconv.Itoa(i), step: 1, rank: 0, world: 16384, start: t0, dur: time.Second,
			model: "NVIDIA H100 80GB HBM3", tokens: int64(1), dataloadNs: int64(1), flops: 1.0})
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for _, td := range batches {
		_ = f.c.ConsumeTraces(context.Background(), td)
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(batches) // the input must not be freed in between
	require.Len(b, f.c.jobs, b.N)
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(b.N), "B/job")
}
