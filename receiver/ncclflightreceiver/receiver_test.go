package ncclflightreceiver

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/metadata"
)

// memStorage is a storage extension keeping data in memory across receiver
// instances, as file_storage keeps it across process restarts.
type memStorage struct {
	component.StartFunc
	component.ShutdownFunc
	mu   sync.Mutex
	data map[string][]byte
	sets map[string]int // writes per key
	// onSet, when set, sees every write with the data after it (the lock
	// held): what a process that died right then would leave on disk.
	onSet func(key string, data map[string][]byte)
}

func (m *memStorage) setsOf(key string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sets[key]
}

func (m *memStorage) GetClient(context.Context, component.Kind, component.ID, string) (storage.Client, error) {
	return &memClient{m: m}, nil
}

type memClient struct{ m *memStorage }

func (c *memClient) Get(_ context.Context, key string) ([]byte, error) {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	return c.m.data[key], nil
}

func (c *memClient) Set(_ context.Context, key string, value []byte) error {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	c.m.data[key] = append([]byte(nil), value...)
	if c.m.sets == nil {
		c.m.sets = map[string]int{}
	}
	c.m.sets[key]++
	if c.m.onSet != nil {
		c.m.onSet(key, c.m.data)
	}
	return nil
}

func (c *memClient) Delete(_ context.Context, key string) error {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	delete(c.m.data, key)
	return nil
}

func (c *memClient) Batch(ctx context.Context, ops ...*storage.Operation) error {
	for _, op := range ops {
		switch op.Type {
		case storage.Get:
			op.Value, _ = c.Get(ctx, op.Key)
		case storage.Set:
			_ = c.Set(ctx, op.Key, op.Value)
		case storage.Delete:
			_ = c.Delete(ctx, op.Key)
		}
	}
	return nil
}

func (c *memClient) Close(context.Context) error { return nil }

var storageID = component.MustNewIDWithName("file_storage", "test")

type hostWithStorage struct{ ext *memStorage }

func (h hostWithStorage) GetExtensions() map[component.ID]component.Component {
	return map[component.ID]component.Component{storageID: h.ext}
}

var _ extension.Extension = (*memStorage)(nil)

type env struct {
	r       *ncclReceiver
	traces  *consumertest.TracesSink
	metrics *consumertest.MetricsSink
	logs    *consumertest.LogsSink
	obs     *observer.ObservedLogs
}

func startReceiver(t *testing.T, cfg *Config, store *memStorage) *env {
	t.Helper()
	core, obs := observer.New(zap.InfoLevel)
	set := receivertest.NewNopSettings(metadata.Type)
	set.Logger = zap.New(core)
	r, err := newNCCLReceiver(cfg, set)
	require.NoError(t, err)
	r.host = "xl003"
	e := &env{r: r, traces: new(consumertest.TracesSink), metrics: new(consumertest.MetricsSink), logs: new(consumertest.LogsSink), obs: obs}
	r.nextTraces, r.nextMetrics, r.nextLogs = e.traces, e.metrics, e.logs
	cfg.Storage = &storageID
	require.NoError(t, r.Start(context.Background(), hostWithStorage{ext: store}))
	return e
}

func (e *env) stop(t *testing.T) {
	require.NoError(t, e.r.Shutdown(context.Background()))
}

func fastConfig(dirs ...string) *Config {
	cfg := createDefaultConfig().(*Config)
	cfg.JobID = "llama-70b"
	cfg.FlightRecorder.Directories = dirs
	cfg.FlightRecorder.RescanInterval = 20 * time.Millisecond
	cfg.FlightRecorder.SettleTime = 20 * time.Millisecond
	return cfg
}

// copyDumps puts a fixture job's pickle dumps into a fresh directory, with
// a host name prefix as users write them.
func copyDumps(t *testing.T, job string) string {
	t.Helper()
	src := filepath.Join("internal", "frdump", "testdata", job)
	dir := t.TempDir()
	entries, err := os.ReadDir(src)
	require.NoError(t, err)
	for _, e := range entries {
		if filepath.Ext(e.Name()) == ".json" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "node7-"+e.Name()), data, 0o644))
	}
	return dir
}

func findings(ld []plog.Logs) []plog.LogRecord {
	var out []plog.LogRecord
	for _, l := range ld {
		rls := l.ResourceLogs()
		for i := 0; i < rls.Len(); i++ {
			lrs := rls.At(i).ScopeLogs().At(0).LogRecords()
			for j := 0; j < lrs.Len(); j++ {
				out = append(out, lrs.At(j))
			}
		}
	}
	return out
}

func attrStr(lr plog.LogRecord, k string) string {
	v, _ := lr.Attributes().Get(k)
	return v.AsString()
}

// The straggler job: every rank's collectives become spans, the straggler
// becomes one finding, and a restart emits nothing again.
func TestStragglerDumpsEndToEnd(t *testing.T) {
	dir := copyDumps(t, "dp8-straggler5-v2.10")
	store := &memStorage{data: map[string][]byte{}}
	e := startReceiver(t, fastConfig(dir), store)
	require.Eventually(t, func() bool { return e.traces.SpanCount() == 8*50 }, 20*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool {
		for _, lr := range findings(e.logs.AllLogs()) {
			if attrStr(lr, semconv.AttrNCCLFinding) == "straggler" {
				return true
			}
		}
		return false
	}, 20*time.Second, 10*time.Millisecond)
	time.Sleep(100 * time.Millisecond)

	var straggler []plog.LogRecord
	for _, lr := range findings(e.logs.AllLogs()) {
		if attrStr(lr, semconv.AttrNCCLFinding) == "straggler" {
			straggler = append(straggler, lr)
		}
	}
	require.Len(t, straggler, 1, "reported once, though every new dump re-runs the analysis")
	ranks, _ := straggler[0].Attributes().Get("nccl.ranks")
	assert.Equal(t, []any{int64(5)}, ranks.Slice().AsRaw())
	assert.Equal(t, plog.SeverityNumberWarn, straggler[0].SeverityNumber())

	// Spans of one collective share a trace across ranks; each has its rank.
	byTrace := map[string]map[int64]bool{}
	for _, td := range e.traces.AllTraces() {
		// Dumps that settle together come as one batch, a resource per rank.
		for r := 0; r < td.ResourceSpans().Len(); r++ {
			rs := td.ResourceSpans().At(r)
			rank, _ := rs.Resource().Attributes().Get(semconv.AttrTrainingRank)
			ws, _ := rs.Resource().Attributes().Get(semconv.AttrTrainingWorldSize)
			assert.Equal(t, int64(8), ws.Int())
			spans := rs.ScopeSpans().At(0).Spans()
			for i := 0; i < spans.Len(); i++ {
				s := spans.At(i)
				assert.Equal(t, ptrace.StatusCodeUnset, s.Status().Code())
				assert.Greater(t, s.EndTimestamp(), s.StartTimestamp(), "duration_ms gives the span a length")
				tid := s.TraceID().String()
				if byTrace[tid] == nil {
					byTrace[tid] = map[int64]bool{}
				}
				byTrace[tid][rank.Int()] = true
			}
		}
	}
	assert.Len(t, byTrace, 50, "one trace per collective")
	for _, ranks := range byTrace {
		assert.Len(t, ranks, 8, "every rank's span of a collective is in its trace")
	}
	assert.NotZero(t, e.metrics.DataPointCount(), "duration histograms")
	// The eight dumps were there at start, so they settled together: one
	// batch, read a dump at a time (a request of spans each, with its
	// rank's resource), one analysis, one save of the state.
	require.Len(t, e.traces.AllTraces(), 8, "a request per dump")
	for _, td := range e.traces.AllTraces() {
		assert.Equal(t, 1, td.ResourceSpans().Len(), "a resource per rank")
	}
	assert.Equal(t, 1, store.setsOf(stateKey), "state saved once for the batch")
	e.stop(t)

	// Restart on the same storage: the same dumps are not emitted again.
	again := startReceiver(t, fastConfig(dir), store)
	time.Sleep(300 * time.Millisecond)
	assert.Zero(t, again.traces.SpanCount())
	assert.Zero(t, again.logs.LogRecordCount())
	again.stop(t)
}

// The hang job: the missing rank is reported; collectives still running at
// dump time become error spans once nothing newer arrives.
func TestHangDumpsEndToEnd(t *testing.T) {
	dir := copyDumps(t, "dp4-hang2-v2.4")
	cfg := fastConfig(dir)
	cfg.FlightRecorder.IncompleteAfter = 200 * time.Millisecond
	e := startReceiver(t, cfg, &memStorage{data: map[string][]byte{}})
	defer e.stop(t)
	// The dumps' files are much newer than their last entries: every rank
	// stopped, and rank 2, missing from collective 17, is the culprit of one
	// hang finding, into which the missing_ranks finding is folded (issue 20).
	var missing plog.LogRecord
	require.Eventually(t, func() bool {
		for _, lr := range findings(e.logs.AllLogs()) {
			if attrStr(lr, semconv.AttrNCCLFinding) == "hang" {
				missing = lr
				return true
			}
		}
		return false
	}, 20*time.Second, 10*time.Millisecond)
	assert.Equal(t, plog.SeverityNumberError, missing.SeverityNumber())
	assert.Equal(t, "17", attrStr(missing, semconv.AttrNCCLCollectiveSeq))
	assert.Contains(t, missing.Body().Str(), "Hang: ranks {2} stopped")
	assert.Contains(t, missing.Body().Str(), "explains: pg=0/coll:17/missing_ranks")

	require.Eventually(t, func() bool {
		for _, td := range e.traces.AllTraces() {
			for r := 0; r < td.ResourceSpans().Len(); r++ {
				spans := td.ResourceSpans().At(r).ScopeSpans().At(0).Spans()
				for i := 0; i < spans.Len(); i++ {
					if spans.At(i).Status().Code() == ptrace.StatusCodeError {
						return true
					}
				}
			}
		}
		return false
	}, 20*time.Second, 10*time.Millisecond, "collective 17 and later, never completed, become error spans")
}

// Bad dumps are skipped with a log line; the receiver keeps reading others.
func TestBadDumpsAreSkipped(t *testing.T) {
	dir := copyDumps(t, "dp4-healthy-v2.7")
	// A pickle that would call os.system: refused, never executed.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "evil_nccl_trace_rank_9"), []byte("\x80\x02cos\nsystem\nq\x00X\x02\x00\x00\x00idq\x01\x85q\x02Rq\x03."), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "garbage_nccl_trace_rank_10"), []byte("not a dump at all"), 0o644))
	data, err := os.ReadFile(filepath.Join(dir, "node7-nccl_trace_rank_0"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "truncated_nccl_trace_rank_11"), data[:len(data)/2], 0o644))
	cfg := fastConfig(dir)
	e := startReceiver(t, cfg, &memStorage{data: map[string][]byte{}})
	defer e.stop(t)
	require.Eventually(t, func() bool { return e.obs.FilterMessageSnippet("cannot decode dump").Len() == 3 }, 20*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { return e.traces.SpanCount() > 0 }, 20*time.Second, 10*time.Millisecond, "the good dumps are still read")
	for _, entry := range e.obs.FilterMessageSnippet("cannot decode dump").All() {
		assert.Contains(t, entry.ContextMap()["path"], "_nccl_trace_rank_", "the log line names the file")
	}
}

func TestRankFromFileName(t *testing.T) {
	r := &ncclReceiver{cfg: createDefaultConfig().(*Config)}
	for name, want := range map[string]int{
		"/fr/nccl_trace_rank_3":           3,
		"/fr/host-a12_nccl_trace_rank_17": 17,
		"/fr/nccl_trace_rank_3.json":      3,
		"/fr/comm_lib_trace_rank_0":       0,
		"/fr/nccl_trace_rank_":            -1, // dynamic file name: no rank
	} {
		assert.Equal(t, want, r.rankOf(name), name)
	}
	r.cfg.FlightRecorder.Rank = 5
	assert.Equal(t, 5, r.rankOf("/fr/dump"), "the configured rank when the name has none")
}

// The pickle and the JSON form of the same dump side by side: each
// operation is emitted once.
func TestPickleAndJSONOfOneDumpEmitOnce(t *testing.T) {
	src := filepath.Join("internal", "frdump", "testdata", "dp8-straggler5-v2.10")
	dir := t.TempDir()
	for _, name := range []string{"nccl_trace_rank_5", "nccl_trace_rank_5.json"} {
		data, err := os.ReadFile(filepath.Join(src, name))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o644))
	}
	e := startReceiver(t, fastConfig(dir), &memStorage{data: map[string][]byte{}})
	defer e.stop(t)
	require.Eventually(t, func() bool { return e.obs.FilterMessageSnippet("cannot").Len() == 0 && e.traces.SpanCount() >= 50 }, 20*time.Second, 10*time.Millisecond)
	time.Sleep(200 * time.Millisecond)
	assert.Equal(t, 50, e.traces.SpanCount())
}

// flight_recorder.stall_after reaches the analysis: with a stall longer
// than the fixture's dumps are old, no rank counts as stopped, so the hang
// of TestHangDumpsEndToEnd is reported as the per-group missing_ranks
// finding (the job's hang, culprit unknown), not as rank 2's.
func TestStallAfterReachesTheAnalysis(t *testing.T) {
	dir := copyDumps(t, "dp4-hang2-v2.4")
	cfg := fastConfig(dir)
	cfg.FlightRecorder.StallAfter = 100 * 365 * 24 * time.Hour
	e := startReceiver(t, cfg, &memStorage{data: map[string][]byte{}})
	require.Eventually(t, func() bool {
		e.r.mu.Lock()
		defer e.r.mu.Unlock()
		return len(e.r.latest[dir]) == 4
	}, 20*time.Second, 10*time.Millisecond)
	e.stop(t)
	var kinds []string
	for _, lr := range findings(e.logs.AllLogs()) {
		kinds = append(kinds, attrStr(lr, semconv.AttrNCCLFinding))
	}
	assert.Contains(t, kinds, semconv.NCCLFindingMissingRanks)
	assert.NotContains(t, kinds, semconv.NCCLFindingHang)
}
