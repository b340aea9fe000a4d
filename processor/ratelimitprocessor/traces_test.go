package ratelimitprocessor

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// newTraces returns a traces processor at rate/burst per job on a fake
// clock, feeding sink.
func newTraces(t *testing.T, h *harness, rate float64, burst int, sink *consumertest.TracesSink) (*tracesProcessor, *fakeClock) {
	t.Helper()
	cfg := createDefaultConfig().(*Config)
	cfg.Traces.SpansPerSecond, cfg.Traces.Burst = rate, burst
	require.NoError(t, cfg.Validate())
	p, err := newTracesProcessor(cfg, h.set, sink)
	require.NoError(t, err)
	clk := &fakeClock{t: t0}
	p.lim.now = clk.now
	return p, clk
}

func TestRunawayJobCutToBudgetNormalJobLosesNothing(t *testing.T) {
	h := newHarness(t)
	sink := new(consumertest.TracesSink)
	p, clk := newTraces(t, h, 1000, 2000, sink)
	ctx := context.Background()

	// One batch: the runaway job's burst passes, the rest is dropped; the
	// normal job in the same batch passes whole.
	require.NoError(t, p.ConsumeTraces(ctx, tracesOf(map[string]int{"runaway": 5000, "normal": 100})))
	assert.Equal(t, map[string]int{"runaway": 2000, "normal": 100}, spansByJob(sink.AllTraces()))

	// A second later the runaway job has earned one second's budget.
	sink.Reset()
	clk.advance(time.Second)
	require.NoError(t, p.ConsumeTraces(ctx, tracesOf(map[string]int{"runaway": 5000, "normal": 100})))
	assert.Equal(t, map[string]int{"runaway": 1000, "normal": 100}, spansByJob(sink.AllTraces()))

	assert.Equal(t, map[string]int64{"key=runaway,signal=traces": 3000 + 4000},
		h.counter(t, "otelcol_processor_ratelimit_dropped_items"), "only the runaway job has drops")
	// The runaway job is named once in the log, not once a batch.
	warned := h.logs.FilterMessageSnippet("over budget").All()
	require.Len(t, warned, 1)
	assert.Equal(t, "runaway", warned[0].ContextMap()["key"])
	assert.Equal(t, "traces", warned[0].ContextMap()["signal"])
}

func TestKeyFromSpanThenClientMetadata(t *testing.T) {
	h := newHarness(t)
	sink := new(consumertest.TracesSink)
	p, _ := newTraces(t, h, 1, 2, sink)

	td := ptrace.NewTraces()
	spans := addJob(td, "", 0) // no job on the resource
	for i := 0; i < 4; i++ {
		spans.AppendEmpty().Attributes().PutStr("training.job.id", "on-span")
	}
	for i := 0; i < 3; i++ {
		spans.AppendEmpty().Attributes().PutInt("training.job.id", 42) // not a string: its text
	}
	for i := 0; i < 5; i++ {
		spans.AppendEmpty() // no key: the client metadata's
	}
	ctx := client.NewContext(context.Background(), client.Info{
		Metadata: client.NewMetadata(map[string][]string{"training.job.id": {"from-metadata"}}),
	})
	require.NoError(t, p.ConsumeTraces(ctx, td))
	assert.Equal(t, 6, sink.SpanCount(), "two per key")
	assert.Equal(t, map[string]int64{
		"key=on-span,signal=traces":       2,
		"key=42,signal=traces":            1,
		"key=from-metadata,signal=traces": 3,
	}, h.counter(t, "otelcol_processor_ratelimit_dropped_items"))

	// Without any key, spans share the "" bucket.
	require.NoError(t, p.ConsumeTraces(context.Background(), tracesOf(map[string]int{"": 5})))
	assert.Equal(t, int64(3), h.counter(t, "otelcol_processor_ratelimit_dropped_items")["key=,signal=traces"])
}

func TestErrorAndSlowSpansSurvive(t *testing.T) {
	h := newHarness(t)
	sink := new(consumertest.TracesSink)
	p, _ := newTraces(t, h, 1, 1, sink)

	td := ptrace.NewTraces()
	spans := addJob(td, "job", 0)
	add := func(name string, set func(ptrace.Span)) {
		sp := spans.AppendEmpty()
		sp.SetName(name)
		set(sp)
	}
	for i := 0; i < 5; i++ {
		add("plain", func(ptrace.Span) {})
	}
	add("error", func(sp ptrace.Span) { sp.Status().SetCode(ptrace.StatusCodeError) })
	add("slow", func(sp ptrace.Span) { sp.Attributes().PutBool("step.slow", true) })
	add("slow-text", func(sp ptrace.Span) { sp.Attributes().PutStr("step.slow", "TRUE") })
	add("not-slow", func(sp ptrace.Span) { sp.Attributes().PutBool("step.slow", false) })
	add("ok-status", func(sp ptrace.Span) { sp.Status().SetCode(ptrace.StatusCodeOk) })
	for i := 0; i < 3; i++ {
		add("error", func(sp ptrace.Span) { sp.Status().SetCode(ptrace.StatusCodeError) })
	}
	require.NoError(t, p.ConsumeTraces(context.Background(), td))

	names := map[string]int{}
	for _, out := range sink.AllTraces() {
		ss := out.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
		for i := 0; i < ss.Len(); i++ {
			names[ss.At(i).Name()]++
		}
	}
	assert.Equal(t, map[string]int{"plain": 1, "error": 4, "slow": 1, "slow-text": 1}, names,
		"the budget of 1 went to the first plain span; protected spans pass uncharged")
	assert.Equal(t, map[string]int64{"signal=traces": 6}, h.counter(t, "otelcol_processor_ratelimit_protected_items"))
	assert.Equal(t, map[string]int64{"key=job,signal=traces": 6}, h.counter(t, "otelcol_processor_ratelimit_dropped_items"))
}

func TestTracesLRUEviction(t *testing.T) {
	h := newHarness(t)
	sink := new(consumertest.TracesSink)
	cfg := createDefaultConfig().(*Config)
	cfg.MaxKeys = 2
	cfg.Traces.SpansPerSecond, cfg.Traces.Burst = 0.001, 1
	p, err := newTracesProcessor(cfg, h.set, sink)
	require.NoError(t, err)
	clk := &fakeClock{t: t0}
	p.lim.now = clk.now
	ctx := context.Background()
	send := func(job string) int {
		sink.Reset()
		require.NoError(t, p.ConsumeTraces(ctx, tracesOf(map[string]int{job: 1})))
		return sink.SpanCount()
	}
	assert.Equal(t, 1, send("a"))
	assert.Equal(t, 1, send("b"))
	assert.Equal(t, 0, send("a"), "a is out of tokens; touching it makes b the least recently used")
	assert.Equal(t, 1, send("c"), "c is new and evicts b")
	assert.Equal(t, 0, send("a"), "a kept its empty bucket")
	assert.Equal(t, 1, send("b"), "b was evicted: it starts full again (and evicts c)")
	assert.Equal(t, 2, p.lim.key.table.len())
	assert.Equal(t, map[string]int64{"signal=traces": 2}, h.counter(t, "otelcol_processor_ratelimit_evicted_keys"))
}

func TestEverythingDroppedSendsNothing(t *testing.T) {
	h := newHarness(t)
	sink := new(consumertest.TracesSink)
	p, _ := newTraces(t, h, 1, 1, sink)
	ctx := context.Background()
	require.NoError(t, p.ConsumeTraces(ctx, tracesOf(map[string]int{"job": 1})))
	require.NoError(t, p.ConsumeTraces(ctx, tracesOf(map[string]int{"job": 3})))
	assert.Len(t, sink.AllTraces(), 1, "the second batch was dropped whole and not sent")

	// A batch that came without spans is passed on as it came.
	require.NoError(t, p.ConsumeTraces(ctx, ptrace.NewTraces()))
	assert.Len(t, sink.AllTraces(), 2)
}

func TestMalformedTracesNeverPanic(t *testing.T) {
	h := newHarness(t)
	sink := new(consumertest.TracesSink)
	p, _ := newTraces(t, h, 1, 1, sink)
	td := ptrace.NewTraces()
	td.ResourceSpans().AppendEmpty()                            // no scopes
	td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty() // no spans
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutEmptyMap("training.job.id").PutStr("x", "y") // a map as key
	rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	rs = td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutEmptyBytes("training.job.id") // empty bytes: no key
	rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty().Attributes().PutEmpty("training.job.id")
	require.NotPanics(t, func() { require.NoError(t, p.ConsumeTraces(context.Background(), td)) })
	require.Len(t, sink.AllTraces(), 1)
	out := sink.AllTraces()[0]
	assert.Equal(t, 1, out.SpanCount(), "a map, empty bytes or an empty value is no key: the spans share the \"\" bucket")
	assert.Equal(t, 3, out.ResourceSpans().Len(), "the two that came empty stay; the one emptied by a drop goes")
}

func TestConcurrentBatchesShareOneBudget(t *testing.T) {
	h := newHarness(t)
	sink := new(consumertest.TracesSink)
	p, _ := newTraces(t, h, 1, 1000, sink) // the clock stands still: only the burst passes
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				assert.NoError(t, p.ConsumeTraces(context.Background(), tracesOf(map[string]int{"job": 50})))
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, 1000, sink.SpanCount())
	assert.Equal(t, int64(3000), h.counter(t, "otelcol_processor_ratelimit_dropped_items")["key=job,signal=traces"])
}
