package ncclflightreceiver

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/metadata"
)

// errMemoryLimit is what the memory limiter returns when it refuses data.
var errMemoryLimit = errors.New("data refused due to high memory usage")

// gate refuses everything, as the memory limiter does under pressure, until
// opened; then it passes everything to the sinks.
type gate struct {
	open    atomic.Bool
	free    atomic.Int64 // requests let through while closed
	refused atomic.Int64
}

func (g *gate) pass() error {
	if g.open.Load() || g.free.Add(-1) >= 0 {
		return nil
	}
	g.refused.Add(1)
	return errMemoryLimit
}

func (g *gate) traces(sink *consumertest.TracesSink) consumer.Traces {
	c, _ := consumer.NewTraces(func(ctx context.Context, td ptrace.Traces) error {
		if err := g.pass(); err != nil {
			return err
		}
		return sink.ConsumeTraces(ctx, td)
	})
	return c
}

func (g *gate) logs(sink *consumertest.LogsSink) consumer.Logs {
	c, _ := consumer.NewLogs(func(ctx context.Context, ld plog.Logs) error {
		if err := g.pass(); err != nil {
			return err
		}
		return sink.ConsumeLogs(ctx, ld)
	})
	return c
}

// observed is a receiver started with its own telemetry collected and,
// optionally, its traces or logs pipeline behind a gate.
type observed struct {
	*env
	tel *componenttest.Telemetry
}

type observeOptions struct {
	store       *memStorage
	tracesGate  *gate
	logsGate    *gate
	sampled     bool          // the collector's default log sampling
	summaryTick time.Duration // the summary of refused inputs
}

func startObserved(t *testing.T, cfg *Config, o observeOptions) *observed {
	t.Helper()
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	core, obs := observer.New(zap.InfoLevel)
	var c zapcore.Core = core
	if o.sampled {
		// service/telemetry's default: the first 10 entries of a message
		// per 10 s tick, then one in 100.
		c = zapcore.NewSamplerWithOptions(core, 10*time.Second, 10, 100)
	}
	set := receivertest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = tel.NewTelemetrySettings()
	set.Logger = zap.New(c)
	r, err := newNCCLReceiver(cfg, set)
	require.NoError(t, err)
	r.host = "xl003"
	if o.summaryTick > 0 {
		r.summaryEvery = o.summaryTick
	}
	e := &env{r: r, traces: new(consumertest.TracesSink), metrics: new(consumertest.MetricsSink), logs: new(consumertest.LogsSink), obs: obs}
	r.nextTraces, r.nextMetrics, r.nextLogs = e.traces, e.metrics, e.logs
	if o.tracesGate != nil {
		r.nextTraces = o.tracesGate.traces(e.traces)
	}
	if o.logsGate != nil {
		r.nextLogs = o.logsGate.logs(e.logs)
	}
	if o.store == nil {
		o.store = &memStorage{data: map[string][]byte{}}
	}
	cfg.Storage = &storageID
	require.NoError(t, r.Start(context.Background(), hostWithStorage{ext: o.store}))
	return &observed{env: e, tel: tel}
}

// refusedInputs returns otelcol_ncclflight_bad_inputs for one input and reason.
func (o *observed) refusedInputs(t *testing.T, input, reason string) int64 {
	m, err := o.tel.GetMetric("otelcol_ncclflight_bad_inputs")
	if err != nil {
		return 0
	}
	sum, ok := m.Data.(metricdata.Sum[int64])
	require.True(t, ok)
	var n int64
	for _, dp := range sum.DataPoints {
		in, _ := dp.Attributes.Value(metadata.TelemetryAttrInput)
		re, _ := dp.Attributes.Value(metadata.TelemetryAttrReason)
		if in.AsString() == input && re.AsString() == reason {
			n += dp.Value
		}
	}
	return n
}

// durationCount is the number of collectives in the newest duration
// histograms: operations counted twice would show here.
func durationCount(sink *consumertest.MetricsSink) uint64 {
	all := sink.AllMetrics()
	if len(all) == 0 {
		return 0
	}
	var n uint64
	rms := all[len(all)-1].ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		ms := rms.At(i).ScopeMetrics().At(0).Metrics()
		for j := 0; j < ms.Len(); j++ {
			if m := ms.At(j); m.Name() == semconv.MetricNCCLCollectiveDuration && m.Type() == pmetric.MetricTypeHistogram {
				for k := 0; k < m.Histogram().DataPoints().Len(); k++ {
					n += m.Histogram().DataPoints().At(k).Count()
				}
			}
		}
	}
	return n
}

// The memory limiter refuses the spans of eight dumps: nothing is marked
// read, the dumps are read again until the spans are accepted, and then
// every operation arrives once and is counted once in the metrics.
func TestRefusedSpansAreReadAgain(t *testing.T) {
	dir := copyDumps(t, "dp8-straggler5-v2.10")
	store := &memStorage{data: map[string][]byte{}}
	g := &gate{}
	e := startObserved(t, fastConfig(dir), observeOptions{store: store, tracesGate: g})
	defer e.stop(t)
	require.Eventually(t, func() bool { return g.refused.Load() >= 3 }, 20*time.Second, 10*time.Millisecond,
		"the refused dumps are read again")
	assert.Zero(t, e.traces.SpanCount())
	assert.Zero(t, store.setsOf(stateKey), "no progress saved while the spans are refused")
	assert.Zero(t, durationCount(e.metrics), "no metrics of operations not emitted")
	assert.NotZero(t, e.obs.FilterMessageSnippet("the traces pipeline refused the spans of").Len())

	g.open.Store(true)
	require.Eventually(t, func() bool { return e.traces.SpanCount() == 8*50 }, 20*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { return durationCount(e.metrics) == 8*50 }, 20*time.Second, 10*time.Millisecond)
	time.Sleep(200 * time.Millisecond)
	assert.Equal(t, 8*50, e.traces.SpanCount(), "each operation once")
	assert.Equal(t, uint64(8*50), durationCount(e.metrics), "each operation counted once")
	st, err := loadState(context.Background(), &memClient{m: store})
	require.NoError(t, err)
	assert.Len(t, st.Dumps, 8, "read once accepted")
}

// Refused, then the collector restarts: the dumps were not marked read, so
// the next run emits them.
func TestRefusedSpansSurviveARestart(t *testing.T) {
	dir := copyDumps(t, "dp4-healthy-v2.7")
	store := &memStorage{data: map[string][]byte{}}
	g := &gate{}
	e := startObserved(t, fastConfig(dir), observeOptions{store: store, tracesGate: g})
	require.Eventually(t, func() bool { return g.refused.Load() >= 1 }, 20*time.Second, 10*time.Millisecond)
	e.stop(t)
	assert.Zero(t, e.traces.SpanCount())

	again := startObserved(t, fastConfig(dir), observeOptions{store: store})
	defer again.stop(t)
	require.Eventually(t, func() bool {
		st, err := loadState(context.Background(), &memClient{m: store})
		return err == nil && len(st.Dumps) == 4
	}, 20*time.Second, 10*time.Millisecond, "the four dumps read, once accepted")
	time.Sleep(200 * time.Millisecond)
	assert.NotZero(t, again.traces.SpanCount())
	assert.Equal(t, again.traces.SpanCount(), distinctOperations(again.traces), "each operation once")
}

// distinctOperations counts the distinct (rank, record id) of the spans.
func distinctOperations(sink *consumertest.TracesSink) int {
	seen := map[[2]int64]bool{}
	for _, td := range sink.AllTraces() {
		for r := 0; r < td.ResourceSpans().Len(); r++ {
			rs := td.ResourceSpans().At(r)
			rank, _ := rs.Resource().Attributes().Get(semconv.AttrTrainingRank)
			spans := rs.ScopeSpans().At(0).Spans()
			for i := 0; i < spans.Len(); i++ {
				id, _ := spans.At(i).Attributes().Get(semconv.AttrNCCLRecordID)
				seen[[2]int64{rank.Int(), id.Int()}] = true
			}
		}
	}
	return len(seen)
}

// The logs pipeline refuses the straggler finding: it is reported once the
// pipeline accepts, and only once.
func TestRefusedFindingsAreReportedAgain(t *testing.T) {
	dir := copyDumps(t, "dp8-straggler5-v2.10")
	g := &gate{}
	e := startObserved(t, fastConfig(dir), observeOptions{logsGate: g})
	defer e.stop(t)
	require.Eventually(t, func() bool { return g.refused.Load() >= 2 }, 20*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { return e.traces.SpanCount() == 8*50 }, 20*time.Second, 10*time.Millisecond, "the spans were accepted")
	g.open.Store(true)
	count := func() int {
		n := 0
		for _, lr := range findings(e.logs.AllLogs()) {
			if attrStr(lr, semconv.AttrNCCLFinding) == "straggler" {
				n++
			}
		}
		return n
	}
	require.Eventually(t, func() bool { return count() == 1 }, 20*time.Second, 10*time.Millisecond)
	time.Sleep(200 * time.Millisecond)
	assert.Equal(t, 1, count())
	assert.Equal(t, 8*50, e.traces.SpanCount(), "findings reported again without emitting spans again")
}

// A dump the collector dies decoding (here: the storage as it was when the
// decoding started, as a crash would leave it) is poisoned at the next
// start: counted, logged and not decoded again, until the file changes.
func TestDumpPoisonedWhenARunDiesDecodingIt(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join("internal", "frdump", "testdata", "dp4-healthy-v2.7")
	for _, name := range []string{"nccl_trace_rank_0", "nccl_trace_rank_1"} {
		data, err := os.ReadFile(filepath.Join(src, name))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o644))
	}
	crashing := filepath.Join(dir, "nccl_trace_rank_1")
	var atCrash map[string][]byte
	store := &memStorage{data: map[string][]byte{}, onSet: func(key string, data map[string][]byte) {
		var m decodingMark
		if key == decodingKey && atCrash == nil && json.Unmarshal(data[key], &m) == nil && m.Path == crashing {
			atCrash = maps.Clone(data)
		}
	}}
	first := startObserved(t, fastConfig(dir), observeOptions{store: store})
	require.Eventually(t, func() bool { return first.traces.SpanCount() > 0 }, 20*time.Second, 10*time.Millisecond)
	first.stop(t)
	store.mu.Lock()
	snapshot := atCrash
	store.mu.Unlock()
	require.NotNil(t, snapshot, "the dump was recorded as being decoded before it was decoded")
	_, marked := snapshot[decodingKey]
	require.True(t, marked)

	// The next run on what the crash left: rank 0 is read, rank 1 is not.
	restartStore := &memStorage{data: snapshot}
	restarted := startObserved(t, fastConfig(dir), observeOptions{store: restartStore})
	defer restarted.stop(t)
	require.Eventually(t, func() bool {
		return restarted.refusedInputs(t, semconv.NCCLSourceFlightRecorder, reasonPoisoned) == 1
	}, 20*time.Second, 10*time.Millisecond)
	logged := restarted.obs.FilterMessageSnippet("stopped while decoding this dump").All()
	require.Len(t, logged, 1)
	assert.Equal(t, crashing, logged[0].ContextMap()["path"])
	assert.Equal(t, reasonPoisoned, logged[0].ContextMap()["reason"])
	rankSpans := func(want int64) int {
		n := 0
		for _, td := range restarted.traces.AllTraces() {
			for i := 0; i < td.ResourceSpans().Len(); i++ {
				if rank, _ := td.ResourceSpans().At(i).Resource().Attributes().Get(semconv.AttrTrainingRank); rank.Int() == want {
					n += td.ResourceSpans().At(i).ScopeSpans().At(0).Spans().Len()
				}
			}
		}
		return n
	}
	time.Sleep(300 * time.Millisecond) // many rescans
	assert.Zero(t, rankSpans(1), "the poisoned dump is not decoded")
	assert.Equal(t, int64(1), restarted.refusedInputs(t, semconv.NCCLSourceFlightRecorder, reasonPoisoned), "counted once")
	st, err := loadState(context.Background(), &memClient{m: restartStore})
	require.NoError(t, err)
	assert.Contains(t, st.Poisoned, crashing, "remembered across restarts")

	// A new version of the file is read.
	later := time.Now().Add(time.Minute)
	require.NoError(t, os.Chtimes(crashing, later, later))
	require.Eventually(t, func() bool { return rankSpans(1) > 0 }, 20*time.Second, 10*time.Millisecond)
}

// Fifteen bad dumps under the collector's log sampling: fifteen in the
// counter and fifteen warnings, each naming its file and reason; their next
// versions are counted and summarized in one line instead of one each.
func TestBadDumpsAreAllLoggedUnderSampling(t *testing.T) {
	dir := t.TempDir()
	var paths []string
	for i := range 15 {
		p := filepath.Join(dir, "bad_nccl_trace_rank_"+string(rune('a'+i)))
		paths = append(paths, p)
		require.NoError(t, os.WriteFile(p, []byte("not a dump at all"), 0o644))
	}
	e := startObserved(t, fastConfig(dir), observeOptions{sampled: true, summaryTick: 50 * time.Millisecond})
	defer e.stop(t)
	require.Eventually(t, func() bool {
		return e.refusedInputs(t, semconv.NCCLSourceFlightRecorder, reasonUndecodable) == 15
	}, 20*time.Second, 10*time.Millisecond)
	logged := e.obs.FilterMessageSnippet("cannot decode dump").All()
	require.Len(t, logged, 15, "sampling hides none")
	seen := map[string]bool{}
	for _, l := range logged {
		assert.Equal(t, reasonUndecodable, l.ContextMap()["reason"])
		assert.Contains(t, l.Message, l.ContextMap()["path"], "the message names the file")
		seen[l.ContextMap()["path"].(string)] = true
	}
	assert.Len(t, seen, 15)

	// New versions of five of them: counted, summarized, not logged each.
	later := time.Now().Add(time.Minute)
	for _, p := range paths[:5] {
		require.NoError(t, os.Chtimes(p, later, later))
	}
	require.Eventually(t, func() bool {
		return e.refusedInputs(t, semconv.NCCLSourceFlightRecorder, reasonUndecodable) == 20
	}, 20*time.Second, 10*time.Millisecond)
	summarized := func() int64 {
		var n int64
		for _, l := range e.obs.FilterMessageSnippet("more inputs refused since the last summary").All() {
			assert.Contains(t, l.Message, "flight_recorder/undecodable: ")
			n += l.ContextMap()["refused"].(int64)
		}
		return n
	}
	require.Eventually(t, func() bool { return summarized() == 5 }, 20*time.Second, 10*time.Millisecond, "summarized")
	assert.Len(t, e.obs.FilterMessageSnippet("cannot decode dump").All(), 15, "repeats are not logged one by one")
}

// Dumps written under a custom TORCH_FR_DUMP_TEMP_FILE prefix that the
// patterns do not match: one warning naming the files and the patterns, one
// count, however many rescans.
func TestDirectoryMatchingNoPatternIsReported(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"myjob_fr_0", "myjob_fr_1", "myjob_fr_2"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("dump"), 0o644))
	}
	cfg := fastConfig(dir)
	e := startObserved(t, cfg, observeOptions{})
	defer e.stop(t)
	require.Eventually(t, func() bool {
		return e.refusedInputs(t, semconv.NCCLSourceFlightRecorder, reasonNoPatternMatch) == 1
	}, 20*time.Second, 10*time.Millisecond)
	time.Sleep(200 * time.Millisecond) // several rescans
	logged := e.obs.FilterMessageSnippet("matches flight_recorder::patterns").All()
	require.Len(t, logged, 1, "once")
	assert.Contains(t, logged[0].Message, "myjob_fr_0")
	assert.Contains(t, logged[0].Message, cfg.FlightRecorder.Patterns[0])
	assert.Equal(t, dir, logged[0].ContextMap()["directory"])
	assert.Equal(t, int64(1), e.refusedInputs(t, semconv.NCCLSourceFlightRecorder, reasonNoPatternMatch))
	assert.Zero(t, e.traces.SpanCount())
}

// A directory with dumps that match is not reported, whatever else it holds.
func TestDirectoryWithMatchingDumpsIsNotReported(t *testing.T) {
	dir := copyDumps(t, "dp4-healthy-v2.7")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o644))
	e := startObserved(t, fastConfig(dir), observeOptions{})
	defer e.stop(t)
	require.Eventually(t, func() bool { return e.traces.SpanCount() > 0 }, 20*time.Second, 10*time.Millisecond)
	time.Sleep(200 * time.Millisecond)
	assert.Zero(t, e.refusedInputs(t, semconv.NCCLSourceFlightRecorder, reasonNoPatternMatch))
	assert.Zero(t, e.obs.FilterMessageSnippet("matches flight_recorder::patterns").Len())
}

// An unreachable RAS endpoint: counted under its reason on every poll,
// logged once in full.
func TestUnavailableRASIsCounted(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there now
	cfg := createDefaultConfig().(*Config)
	cfg.RAS.Endpoint = addr
	cfg.RAS.Interval = 20 * time.Millisecond
	e := startObserved(t, cfg, observeOptions{})
	defer e.stop(t)
	require.Eventually(t, func() bool { return e.refusedInputs(t, semconv.NCCLSourceRAS, reasonUnavailable) >= 3 }, 20*time.Second, 10*time.Millisecond)
	logged := e.obs.FilterMessageSnippet("RAS status unavailable").All()
	require.Len(t, logged, 1)
	assert.Equal(t, addr, logged[0].ContextMap()["endpoint"])
}

// inspectorDir holds the inspector's example lines and, after them, extra.
func inspectorDir(t *testing.T, extra string) (dir string, lines int) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("internal", "inspector", "testdata", "readme-examples.v4.0.jsonl"))
	require.NoError(t, err)
	dir = t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "example-hostname-pid1639453.log"), append(data, extra...), 0o644))
	return dir, strings.Count(strings.TrimSpace(string(data)), "\n") + 1
}

// The traces pipeline refuses the inspector's spans: the lines are read
// again, and once accepted each is emitted and counted in the metrics once.
func TestRefusedInspectorSpansAreReadAgain(t *testing.T) {
	dir, lines := inspectorDir(t, "")
	cfg := createDefaultConfig().(*Config)
	cfg.Inspector.Directories = []string{dir}
	cfg.Inspector.PollInterval = 20 * time.Millisecond
	g := &gate{}
	e := startObserved(t, cfg, observeOptions{tracesGate: g})
	defer e.stop(t)
	require.Eventually(t, func() bool { return g.refused.Load() >= 3 }, 20*time.Second, 10*time.Millisecond)
	assert.Zero(t, durationCount(e.metrics), "refused lines are not counted")
	g.open.Store(true)
	require.Eventually(t, func() bool { return e.traces.SpanCount() == lines }, 20*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { return durationCount(e.metrics) == uint64(lines) }, 20*time.Second, 10*time.Millisecond)
	time.Sleep(200 * time.Millisecond)
	assert.Equal(t, lines, e.traces.SpanCount())
	assert.Equal(t, uint64(lines), durationCount(e.metrics), "each line counted once")
}

// Malformed inspector lines: counted under their reason and summarized,
// the good lines read.
func TestMalformedInspectorLinesAreCounted(t *testing.T) {
	dir, lines := inspectorDir(t, "{not json\n{\"also\": broken\nnonsense\n")
	cfg := createDefaultConfig().(*Config)
	cfg.Inspector.Directories = []string{dir}
	cfg.Inspector.PollInterval = 20 * time.Millisecond
	e := startObserved(t, cfg, observeOptions{summaryTick: 20 * time.Millisecond})
	defer e.stop(t)
	require.Eventually(t, func() bool { return e.traces.SpanCount() == lines }, 20*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool {
		return e.refusedInputs(t, semconv.NCCLSourceInspector, reasonMalformedLine) == 3
	}, 20*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool {
		return e.obs.FilterMessageSnippet("inspector/malformed_line: 3").Len() == 1
	}, 20*time.Second, 10*time.Millisecond, "in the summary")
	time.Sleep(100 * time.Millisecond)
	assert.Equal(t, int64(3), e.refusedInputs(t, semconv.NCCLSourceInspector, reasonMalformedLine), "counted once")
}

// The spans of operations that never completed (emitted after
// incomplete_after) are refused: they stay pending and are emitted once
// the pipeline accepts, as many as without the refusal.
func TestRefusedIncompleteOperationsAreEmittedLater(t *testing.T) {
	run := func(g *gate) *observed {
		cfg := fastConfig(copyDumps(t, "dp4-hang2-v2.4"))
		cfg.FlightRecorder.IncompleteAfter = 100 * time.Millisecond
		return startObserved(t, cfg, observeOptions{tracesGate: g})
	}
	errorSpans := func(e *observed) int {
		n := 0
		for _, td := range e.traces.AllTraces() {
			for r := 0; r < td.ResourceSpans().Len(); r++ {
				spans := td.ResourceSpans().At(r).ScopeSpans().At(0).Spans()
				for i := 0; i < spans.Len(); i++ {
					if spans.At(i).Status().Code() == ptrace.StatusCodeError {
						n++
					}
				}
			}
		}
		return n
	}
	// Without refusals: how many spans, how many of them errors.
	open := &gate{}
	open.open.Store(true)
	control := run(open)
	require.Eventually(t, func() bool { return errorSpans(control) > 0 }, 20*time.Second, 10*time.Millisecond)
	time.Sleep(300 * time.Millisecond) // several flushes: nothing more is due
	want, wantErrors := control.traces.SpanCount(), errorSpans(control)
	control.stop(t)

	g := &gate{}
	g.free.Store(1) // the dumps' batch passes, the flushes are refused
	e := run(g)
	defer e.stop(t)
	require.Eventually(t, func() bool { return g.refused.Load() >= 3 }, 20*time.Second, 10*time.Millisecond)
	assert.Zero(t, errorSpans(e), "refused")
	assert.NotZero(t, e.obs.FilterMessageSnippet("operations not completed; emitting them again").Len())
	g.open.Store(true)
	require.Eventually(t, func() bool { return errorSpans(e) == wantErrors }, 20*time.Second, 10*time.Millisecond)
	time.Sleep(300 * time.Millisecond)
	assert.Equal(t, want, e.traces.SpanCount(), "each operation once")
	assert.Equal(t, wantErrors, errorSpans(e))
}

// Past maxLoggedRejections distinct inputs, refusals are only summarized:
// memory stays bounded and nothing goes uncounted.
func TestRejectionsLogBounded(t *testing.T) {
	core, obs := observer.New(zap.InfoLevel)
	j := newRejections(zap.New(core))
	for i := range maxLoggedRejections + 3 {
		j.add(semconv.NCCLSourceFlightRecorder, reasonUndecodable, "/fr/dump_"+strconv.Itoa(i), "cannot decode dump, skipping it")
	}
	j.add(semconv.NCCLSourceFlightRecorder, reasonUndecodable, "/fr/dump_0", "cannot decode dump, skipping it")
	assert.Len(t, j.logged, maxLoggedRejections)
	assert.Equal(t, maxLoggedRejections, obs.FilterMessageSnippet("cannot decode dump").Len())
	j.summarize()
	summary := obs.FilterMessageSnippet("more inputs refused since the last summary").All()
	require.Len(t, summary, 1)
	assert.Contains(t, summary[0].Message, "flight_recorder/undecodable: 4")
	j.summarize()
	assert.Equal(t, 1, obs.FilterMessageSnippet("more inputs refused").Len(), "nothing new, no line")
}
