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
	"syscall"
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
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/watch"
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
	// A request per dump: three batches of eight.
	require.Eventually(t, func() bool { return g.refused.Load() >= 3*8 }, 20*time.Second, 10*time.Millisecond,
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

// A batch the collector dies reading (here: the storage as it was when the
// batch was recorded as being read, as a crash would leave it) is poisoned
// at the next start, every dump of it, whichever the run died on: counted,
// logged and not decoded again, until a file changes. A crash that killed
// the agent for the memory of the whole batch cannot come back on the next
// dump of it after every restart.
func TestBatchPoisonedWhenARunDiesReadingIt(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join("internal", "frdump", "testdata", "dp4-healthy-v2.7")
	var batch []string
	for _, name := range []string{"nccl_trace_rank_0", "nccl_trace_rank_1", "nccl_trace_rank_2"} {
		data, err := os.ReadFile(filepath.Join(src, name))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o644))
		batch = append(batch, filepath.Join(dir, name))
	}
	var atCrash map[string][]byte
	store := &memStorage{data: map[string][]byte{}, onSet: func(key string, data map[string][]byte) {
		var m decodingMark
		if key == decodingKey && atCrash == nil && json.Unmarshal(data[key], &m) == nil {
			atCrash = maps.Clone(data)
		}
	}}
	first := startObserved(t, fastConfig(dir), observeOptions{store: store})
	require.Eventually(t, func() bool { return first.traces.SpanCount() > 0 }, 20*time.Second, 10*time.Millisecond)
	first.stop(t)
	store.mu.Lock()
	snapshot := atCrash
	store.mu.Unlock()
	require.NotNil(t, snapshot, "the batch was recorded as being read before its first dump was decoded")
	var mark decodingMark
	require.NoError(t, json.Unmarshal(snapshot[decodingKey], &mark))
	var marked []string
	for _, d := range mark.dumps() {
		marked = append(marked, d.Path)
	}
	require.ElementsMatch(t, batch, marked, "the whole batch is recorded, in one write")

	// The next run on what the crash left: no dump of the batch is read.
	restartStore := &memStorage{data: snapshot}
	restarted := startObserved(t, fastConfig(dir), observeOptions{store: restartStore})
	defer restarted.stop(t)
	require.Eventually(t, func() bool {
		return restarted.refusedInputs(t, semconv.NCCLSourceFlightRecorder, reasonPoisoned) == 3
	}, 20*time.Second, 10*time.Millisecond)
	logged := restarted.obs.FilterMessageSnippet("stopped while reading the batch of dumps").All()
	require.Len(t, logged, 3)
	for i, l := range logged {
		assert.Contains(t, batch, l.ContextMap()["path"], i)
		assert.Equal(t, reasonPoisoned, l.ContextMap()["reason"])
	}
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
	assert.Zero(t, restarted.traces.SpanCount(), "no poisoned dump is decoded")
	assert.Equal(t, int64(3), restarted.refusedInputs(t, semconv.NCCLSourceFlightRecorder, reasonPoisoned), "counted once each")
	st, err := loadState(context.Background(), &memClient{m: restartStore})
	require.NoError(t, err)
	for _, p := range batch {
		assert.Contains(t, st.Poisoned, p, "remembered across restarts")
	}

	// A new version of a file is read; the others stay poisoned.
	later := time.Now().Add(time.Minute)
	require.NoError(t, os.Chtimes(batch[1], later, later))
	require.Eventually(t, func() bool { return rankSpans(1) > 0 }, 20*time.Second, 10*time.Millisecond)
	assert.Zero(t, rankSpans(0)+rankSpans(2))
}

// A run that dies after it saved the state of a batch it read in full, but
// before it cleared the batch's record, poisons nothing: those versions
// were read. A record in the form 0.2.0 and earlier wrote (one dump)
// still poisons its dump.
func TestBatchReadInFullIsNotPoisoned(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join("internal", "frdump", "testdata", "dp4-healthy-v2.7")
	for _, name := range []string{"nccl_trace_rank_0", "nccl_trace_rank_1"} {
		data, err := os.ReadFile(filepath.Join(src, name))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o644))
	}
	var atCrash map[string][]byte
	store := &memStorage{data: map[string][]byte{}, onSet: func(key string, data map[string][]byte) {
		if _, marked := data[decodingKey]; key == stateKey && marked && atCrash == nil {
			atCrash = maps.Clone(data)
		}
	}}
	first := startObserved(t, fastConfig(dir), observeOptions{store: store})
	require.Eventually(t, func() bool { return first.traces.SpanCount() > 0 }, 20*time.Second, 10*time.Millisecond)
	first.stop(t)
	store.mu.Lock()
	snapshot := atCrash
	store.mu.Unlock()
	require.NotNil(t, snapshot, "the state was saved before the batch's record was cleared")

	restartStore := &memStorage{data: snapshot}
	restarted := startObserved(t, fastConfig(dir), observeOptions{store: restartStore})
	time.Sleep(300 * time.Millisecond) // many rescans
	assert.Zero(t, restarted.refusedInputs(t, semconv.NCCLSourceFlightRecorder, reasonPoisoned))
	assert.Zero(t, restarted.traces.SpanCount(), "read before: not emitted again")
	restarted.stop(t)

	// The one-dump record of an older version.
	crashing := filepath.Join(dir, "nccl_trace_rank_1")
	info, err := os.Stat(crashing)
	require.NoError(t, err)
	key := watch.File{Path: crashing, Size: info.Size(), ModTime: info.ModTime(), Inode: inodeOf(t, info)}.Key()
	old, err := json.Marshal(map[string]any{"path": crashing, "key": key, "at": 1})
	require.NoError(t, err)
	oldStore := &memStorage{data: map[string][]byte{decodingKey: old}}
	upgraded := startObserved(t, fastConfig(dir), observeOptions{store: oldStore})
	defer upgraded.stop(t)
	require.Eventually(t, func() bool {
		return upgraded.refusedInputs(t, semconv.NCCLSourceFlightRecorder, reasonPoisoned) == 1
	}, 20*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { return upgraded.traces.SpanCount() > 0 }, 20*time.Second, 10*time.Millisecond)
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
	g.free.Store(4) // the four dumps' requests pass, the flushes are refused
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

// inodeOf is the inode the watcher keys a file version with.
func inodeOf(t *testing.T, info os.FileInfo) uint64 {
	t.Helper()
	st, ok := info.Sys().(*syscall.Stat_t)
	require.True(t, ok)
	return st.Ino
}
