package stepspanprocessor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/processor/stepspanprocessor/internal/metadata"
)

// capture records what the processor sends on, with the job the client
// metadata carried.
type capture struct {
	mu    sync.Mutex
	spans []ptrace.Span
	res   []pcommon.Map
	jobs  []string
}

func (c *capture) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func (c *capture) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	job := strings.Join(client.FromContext(ctx).Metadata.Get(semconv.AttrTrainingJobID), ",")
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				c.spans = append(c.spans, spans.At(k))
				c.res = append(c.res, rss.At(i).Resource().Attributes())
				c.jobs = append(c.jobs, job)
			}
		}
	}
	return nil
}

func (c *capture) byName(name string) []ptrace.Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []ptrace.Span
	for _, s := range c.spans {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

func (c *capture) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.spans)
}

func testConfig() *Config {
	cfg := createDefaultConfig().(*Config)
	cfg.CollectiveWait = 50 * time.Millisecond
	cfg.OrphanAfter = 200 * time.Millisecond
	return cfg
}

func start(t *testing.T, cfg *Config) (*stepSpanProcessor, *capture) {
	t.Helper()
	sink := &capture{}
	p, err := NewFactory().CreateTraces(context.Background(), processortest.NewNopSettings(metadata.Type), cfg, sink)
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, p.Shutdown(context.Background())) })
	return p.(*stepSpanProcessor), sink
}

var t0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// stepTraces is what a training script sends for one rank and step, with
// ids of its own (random in real scripts).
func stepTraces(job string, attempt, step, rank int64, host string, from, to time.Time) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	r := rs.Resource().Attributes()
	r.PutStr("service.name", "trainer")
	r.PutStr(semconv.AttrTrainingJobID, job)
	r.PutInt(semconv.AttrTrainingAttempt, attempt)
	r.PutInt(semconv.AttrTrainingRank, rank)
	r.PutStr(semconv.AttrHostName, host)
	s := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	s.SetName(semconv.SpanTrainStep)
	s.SetTraceID(pcommon.TraceID{1, 2, 3})
	s.SetSpanID(pcommon.SpanID{4, 5, 6})
	s.SetStartTimestamp(pcommon.NewTimestampFromTime(from))
	s.SetEndTimestamp(pcommon.NewTimestampFromTime(to))
	s.Attributes().PutInt(semconv.AttrIterationStep, step)
	s.Attributes().PutInt("training.phase.forward_ns", 120_000_000)
	return td
}

// collectiveTraces is a collective span of a rank as ncclflightreceiver
// emits it.
func collectiveTraces(host string, rank int64, name string, from time.Time, d time.Duration, failed bool) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr(semconv.AttrHostName, host)
	rs.Resource().Attributes().PutInt(semconv.AttrTrainingRank, rank)
	s := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	s.SetName(name)
	s.SetTraceID(pcommon.TraceID{9})
	s.SetSpanID(pcommon.SpanID{byte(from.UnixNano() % 251), byte(rank)})
	s.SetStartTimestamp(pcommon.NewTimestampFromTime(from))
	s.SetEndTimestamp(pcommon.NewTimestampFromTime(from.Add(d)))
	s.Attributes().PutStr(semconv.AttrNCCLSource, "flight_recorder")
	if failed {
		s.Status().SetCode(ptrace.StatusCodeError)
	}
	return td
}

// The contract's ids, computed here from the documented byte strings.
func contractIDs(job string, attempt, step, rank int64) (trace, span, parent string) {
	h := func(s string) string { sum := sha256.Sum256([]byte(s)); return hex.EncodeToString(sum[:]) }
	base := job + "\x00" + strconv.FormatInt(attempt, 10) + "\x00" + strconv.FormatInt(step, 10)
	return h(base)[:32], h(base + "\x00" + strconv.FormatInt(rank, 10))[:16], h(base + "\x00root")[:16]
}

func TestRankSpansGetTheContractIDs(t *testing.T) {
	p, sink := start(t, testConfig())
	for rank := int64(0); rank < 8; rank++ {
		require.NoError(t, p.ConsumeTraces(context.Background(), stepTraces("llama-70b", 0, 18231, rank, "xl003", t0, t0.Add(time.Second))))
	}
	require.Eventually(t, func() bool { return len(sink.byName(semconv.SpanTrainStep)) == 8 }, 5*time.Second, 10*time.Millisecond)
	traces := map[string]bool{}
	for i, s := range sink.byName(semconv.SpanTrainStep) {
		rank, _ := s.Attributes().Get(semconv.AttrTrainingRank)
		_ = rank
		r := sink.res[i]
		rk, _ := r.Get(semconv.AttrTrainingRank)
		trace, span, parent := contractIDs("llama-70b", 0, 18231, rk.Int())
		assert.Equal(t, trace, s.TraceID().String())
		assert.Equal(t, span, s.SpanID().String())
		assert.Equal(t, parent, s.ParentSpanID().String())
		traces[s.TraceID().String()] = true
		assert.Equal(t, "llama-70b", sink.jobs[i], "training.job.id in the client metadata, for the Kafka key")
	}
	assert.Len(t, traces, 1, "the 8 ranks of a step share one trace")
}

func TestRestartedJobDoesNotCollide(t *testing.T) {
	p, sink := start(t, testConfig())
	require.NoError(t, p.ConsumeTraces(context.Background(), stepTraces("llama-70b", 0, 10, 1, "xl003", t0, t0.Add(time.Second))))
	require.NoError(t, p.ConsumeTraces(context.Background(), stepTraces("llama-70b", 1, 10, 1, "xl003", t0.Add(time.Hour), t0.Add(time.Hour+time.Second))))
	require.Eventually(t, func() bool { return len(sink.byName(semconv.SpanTrainStep)) == 2 }, 5*time.Second, 10*time.Millisecond)
	spans := sink.byName(semconv.SpanTrainStep)
	assert.NotEqual(t, spans[0].TraceID(), spans[1].TraceID(), "attempt 1 replays step 10 in its own trace")
}

// The rank's collectives within the step, arriving before and after the
// step span, fold into its attributes; the slow and the failed one go out
// as full spans under it; the normal ones do not go out at all.
func TestCollectivesFoldIntoTheStep(t *testing.T) {
	p, sink := start(t, testConfig())
	ctx := context.Background()
	for i := 0; i < 4; i++ { // normal all_reduces, 10 ms each
		require.NoError(t, p.ConsumeTraces(ctx, collectiveTraces("xl003", 3, "nccl:all_reduce", t0.Add(time.Duration(100+i*100)*time.Millisecond), 10*time.Millisecond, false)))
	}
	require.NoError(t, p.ConsumeTraces(ctx, stepTraces("llama-70b", 0, 7, 3, "xl003", t0, t0.Add(time.Second))))
	// Late: a slow one (10x the rank's usual) and a timed-out broadcast.
	require.NoError(t, p.ConsumeTraces(ctx, collectiveTraces("xl003", 3, "nccl:all_reduce", t0.Add(600*time.Millisecond), 100*time.Millisecond, false)))
	require.NoError(t, p.ConsumeTraces(ctx, collectiveTraces("xl003", 3, "nccl:broadcast", t0.Add(800*time.Millisecond), 5*time.Millisecond, true)))
	// Another rank's collective and one outside the step are not its own.
	require.NoError(t, p.ConsumeTraces(ctx, collectiveTraces("xl003", 4, "nccl:all_reduce", t0.Add(200*time.Millisecond), 10*time.Millisecond, false)))
	require.NoError(t, p.ConsumeTraces(ctx, collectiveTraces("xl003", 3, "nccl:all_reduce", t0.Add(2*time.Second), 10*time.Millisecond, false)))

	require.Eventually(t, func() bool { return len(sink.byName(semconv.SpanTrainStep)) == 1 }, 5*time.Second, 10*time.Millisecond)
	step := sink.byName(semconv.SpanTrainStep)[0]
	a := step.Attributes()
	get := func(k string) int64 { v, ok := a.Get(k); require.True(t, ok, k); return v.Int() }
	assert.Equal(t, int64(6), get(semconv.AttrCollectivesCount))
	assert.Equal(t, int64(4*10+100+5)*int64(time.Millisecond), get(semconv.AttrCollectivesTotalNs))
	assert.Equal(t, int64(100*time.Millisecond), get(semconv.AttrCollectivesMaxNs))
	assert.Equal(t, int64(2), get(semconv.AttrCollectivesAnomalies))
	offsets, _ := a.Get(semconv.AttrCollectivesOffsetsNs)
	assert.Equal(t, 6, offsets.Slice().Len())

	all := sink.byName("nccl:all_reduce")
	require.Len(t, all, 1, "only the slow all_reduce of this step goes out now")
	assert.Equal(t, step.TraceID(), all[0].TraceID())
	assert.Equal(t, step.SpanID(), all[0].ParentSpanID())
	bc := sink.byName("nccl:broadcast")
	require.Len(t, bc, 1)
	assert.Equal(t, step.SpanID(), bc[0].ParentSpanID())

	// The collectives no step claimed go out as they are once orphaned.
	require.Eventually(t, func() bool { return len(sink.byName("nccl:all_reduce")) == 3 }, 5*time.Second, 10*time.Millisecond)
}

func TestOtherSpansPassThrough(t *testing.T) {
	p, sink := start(t, testConfig())
	td := ptrace.NewTraces()
	td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty().SetName("http.request")
	require.NoError(t, p.ConsumeTraces(context.Background(), td))
	assert.Equal(t, 1, sink.count(), "sent on at once")
}

// Garbage from a job (step numbers that never repeat, huge attributes)
// stays within the bounds.
func TestBounds(t *testing.T) {
	cfg := testConfig()
	cfg.MaxOpenSteps = 10
	cfg.MaxAttributeBytes = 16
	cfg.CollectiveWait = time.Hour
	cfg.OrphanAfter = time.Hour
	p, sink := start(t, cfg)
	for step := int64(0); step < 1000; step++ {
		td := stepTraces("llama-70b", 0, step, 0, "xl003", t0, t0.Add(time.Second))
		td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().PutStr("junk", strings.Repeat("x", 1<<20))
		require.NoError(t, p.ConsumeTraces(context.Background(), td))
	}
	p.mu.Lock()
	open := len(p.steps)
	p.mu.Unlock()
	assert.LessOrEqual(t, open, 10)
	assert.Equal(t, 990, sink.count(), "the oldest steps were sent on, not dropped")
	junk, _ := sink.byName(semconv.SpanTrainStep)[0].Attributes().Get("junk")
	assert.Len(t, junk.Str(), 16)
}

func TestShutdownSendsWhatIsHeld(t *testing.T) {
	cfg := testConfig()
	cfg.CollectiveWait = time.Hour
	cfg.OrphanAfter = time.Hour
	sink := &capture{}
	pr, err := NewFactory().CreateTraces(context.Background(), processortest.NewNopSettings(metadata.Type), cfg, sink)
	require.NoError(t, err)
	require.NoError(t, pr.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, pr.ConsumeTraces(context.Background(), stepTraces("j", 0, 1, 0, "h", t0, t0.Add(time.Second))))
	require.NoError(t, pr.ConsumeTraces(context.Background(), collectiveTraces("h", 5, "nccl:all_reduce", t0, time.Millisecond, false)))
	require.NoError(t, pr.Shutdown(context.Background()))
	assert.Equal(t, 2, sink.count(), "nothing held is lost at shutdown")
}

// An agent restarted mid-step: ranks 0-3 went through the old process,
// ranks 4-7 through the new one. Their spans still form one trace under one
// root, since the ids come from the step, not from the process.
func TestAgentRestartMidStep(t *testing.T) {
	ids := map[string]int{}
	for _, ranks := range [][]int64{{0, 1, 2, 3}, {4, 5, 6, 7}} {
		sink := &capture{}
		pr, err := NewFactory().CreateTraces(context.Background(), processortest.NewNopSettings(metadata.Type), testConfig(), sink)
		require.NoError(t, err)
		require.NoError(t, pr.Start(context.Background(), componenttest.NewNopHost()))
		for _, rank := range ranks {
			require.NoError(t, pr.ConsumeTraces(context.Background(), stepTraces("llama-70b", 0, 42, rank, "xl003", t0, t0.Add(time.Second))))
		}
		require.NoError(t, pr.Shutdown(context.Background())) // a restart sends what it held
		for _, s := range sink.byName(semconv.SpanTrainStep) {
			ids[s.TraceID().String()+"/"+s.ParentSpanID().String()]++
		}
	}
	require.Len(t, ids, 1, "one trace and one root for the step")
	for _, n := range ids {
		assert.Equal(t, 8, n)
	}
}

// blockingSink accepts nothing until the context of the call ends: the
// kafka exporter's queue, full, in a pipeline that blocks on overflow.
type blockingSink struct {
	mu                  sync.Mutex
	calls, withDeadline int
}

func (*blockingSink) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }
func (b *blockingSink) ConsumeTraces(ctx context.Context, _ ptrace.Traces) error {
	b.mu.Lock()
	b.calls++
	if _, ok := ctx.Deadline(); ok {
		b.withDeadline++
	}
	b.mu.Unlock()
	<-ctx.Done()
	return ctx.Err()
}

// Shutdown's final flush into a pipeline that accepts nothing ends at the
// loop's bound: the collector's own context never ends (issue 29).
func TestShutdownWithThePipelineBlocked(t *testing.T) {
	cfg := testConfig()
	cfg.CollectiveWait = time.Hour
	cfg.OrphanAfter = time.Hour
	sink := &blockingSink{}
	pr, err := NewFactory().CreateTraces(context.Background(), processortest.NewNopSettings(metadata.Type), cfg, sink)
	require.NoError(t, err)
	pr.(*stepSpanProcessor).loop.FinalFlushTimeout = 10 * time.Millisecond
	require.NoError(t, pr.Start(context.Background(), componenttest.NewNopHost()))
	require.NoError(t, pr.ConsumeTraces(context.Background(), stepTraces("j", 0, 1, 0, "h", t0, t0.Add(time.Second))))
	require.NoError(t, pr.ConsumeTraces(context.Background(), stepTraces("j", 0, 1, 1, "h", t0, t0.Add(time.Second))))
	require.NoError(t, pr.Shutdown(context.Background()))
	sink.mu.Lock()
	defer sink.mu.Unlock()
	assert.Equal(t, 2, sink.calls, "both held steps were offered")
	assert.Equal(t, 2, sink.withDeadline, "the final flush's sends have no deadline")
}
