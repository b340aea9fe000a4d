//go:build unix

package ncclflightreceiver

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump/frdumptest"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/watch"
)

// startWithTelemetry is startReceiver with the receiver's own telemetry
// collected.
func startWithTelemetry(t *testing.T, cfg *Config) (*env, *componenttest.Telemetry) {
	t.Helper()
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) })
	core, obs := observer.New(zap.InfoLevel)
	set := receivertest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = tel.NewTelemetrySettings()
	set.Logger = zap.New(core)
	r, err := newNCCLReceiver(cfg, set)
	require.NoError(t, err)
	r.host = "xl003"
	e := &env{r: r, traces: new(consumertest.TracesSink), metrics: new(consumertest.MetricsSink), logs: new(consumertest.LogsSink), obs: obs}
	r.nextTraces, r.nextMetrics, r.nextLogs = e.traces, e.metrics, e.logs
	cfg.Storage = &storageID
	require.NoError(t, r.Start(context.Background(), hostWithStorage{ext: &memStorage{data: map[string][]byte{}}}))
	return e, tel
}

// badInputs returns otelcol_ncclflight_bad_inputs for one input and reason
// ("" for the points without a reason).
func badInputs(t *testing.T, tel *componenttest.Telemetry, input, reason string) int64 {
	m, err := tel.GetMetric("otelcol_ncclflight_bad_inputs")
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

// refusalLogged says whether a warning names path and reason.
func refusalLogged(e *env, path, reason string) bool {
	for _, l := range e.obs.FilterMessageSnippet("refusing input file").All() {
		c := l.ContextMap()
		if c["path"] == path && c["reason"] == reason {
			return true
		}
	}
	return false
}

// A symlink in the world-writable dump directory pointing at a file outside
// it (here a valid dump, as an attacker would make it): refused, counted
// and logged once, never read, while the regular dump beside it is.
func TestDumpDirectorySymlinkIsRefused(t *testing.T) {
	dir := t.TempDir()
	d := parseFixture(t, "dp4-healthy-v2.7", 0)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "nccl_trace_rank_0"), frdumptest.Pickle(d), 0o644))
	outside := filepath.Join(t.TempDir(), "nccl_trace_rank_1")
	require.NoError(t, os.WriteFile(outside, frdumptest.Pickle(d), 0o600))
	link := filepath.Join(dir, "nccl_trace_rank_1")
	require.NoError(t, os.Symlink(outside, link))

	e, tel := startWithTelemetry(t, fastConfig(dir))
	defer e.stop(t)
	require.Eventually(t, func() bool {
		return e.traces.SpanCount() == len(d.Entries) && badInputs(t, tel, semconv.NCCLSourceFlightRecorder, "symlink") == 1
	}, 20*time.Second, 10*time.Millisecond)
	assert.True(t, refusalLogged(e, link, "symlink"), "a warning names the file")
	time.Sleep(200 * time.Millisecond) // ten rescans
	assert.Equal(t, len(d.Entries), e.traces.SpanCount(), "the symlink's target is never read")
	assert.Equal(t, int64(1), badInputs(t, tel, semconv.NCCLSourceFlightRecorder, "symlink"), "counted once, not per rescan")
	for _, s := range spanRanks(e) {
		assert.Equal(t, int64(0), s)
	}
}

// An inspector file replaced by a FIFO after it was tracked: the poll does
// not block on it (a plain open would wait for a writer forever): the FIFO
// is counted and logged, and a new inspector file is read afterwards.
func TestInspectorFIFOSwappedInDoesNotBlock(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile(filepath.Join("internal", "inspector", "testdata", "readme-examples.v4.0.jsonl"))
	require.NoError(t, err)
	tracked := filepath.Join(dir, "example-hostname-pid1639453.log")
	require.NoError(t, os.WriteFile(tracked, data, 0o644))
	cfg := createDefaultConfig().(*Config)
	cfg.Inspector.Directories = []string{dir}
	cfg.Inspector.PollInterval = 20 * time.Millisecond
	e, tel := startWithTelemetry(t, cfg)
	defer e.stop(t)
	lines := strings.Count(strings.TrimSpace(string(data)), "\n") + 1
	require.Eventually(t, func() bool { return e.traces.SpanCount() == lines }, 20*time.Second, 10*time.Millisecond)

	require.NoError(t, os.Remove(tracked))
	require.NoError(t, syscall.Mkfifo(tracked, 0o600))
	require.Eventually(t, func() bool {
		return badInputs(t, tel, semconv.NCCLSourceInspector, "not_regular") == 1 && refusalLogged(e, tracked, "not_regular")
	}, 20*time.Second, 10*time.Millisecond)

	// The poll went on: another process's file is read.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "example-hostname-pid7.log"), data, 0o644))
	require.Eventually(t, func() bool { return e.traces.SpanCount() == 2*lines }, 20*time.Second, 10*time.Millisecond)
	assert.Equal(t, int64(1), badInputs(t, tel, semconv.NCCLSourceInspector, "not_regular"), "counted once while it stays a FIFO")
}

// spanRanks returns the training.rank of every span's resource.
func spanRanks(e *env) []int64 {
	var ranks []int64
	for _, td := range e.traces.AllTraces() {
		rss := td.ResourceSpans()
		for i := 0; i < rss.Len(); i++ {
			v, ok := rss.At(i).Resource().Attributes().Get(semconv.AttrTrainingRank)
			if !ok {
				continue
			}
			for j := 0; j < rss.At(i).ScopeSpans().At(0).Spans().Len(); j++ {
				ranks = append(ranks, v.Int())
			}
		}
	}
	return ranks
}

// A dump renamed or removed between the directory's listing and its read
// (a writer moving its temporary file into place) is not a bad input: not
// counted, not logged as a refusal; the dump under its new name is read.
func TestDumpGoneBeforeItIsReadIsNotABadInput(t *testing.T) {
	dir := t.TempDir()
	d := parseFixture(t, "dp4-healthy-v2.7", 0)
	e, tel := startWithTelemetry(t, fastConfig(dir))
	defer e.stop(t)

	gone := filepath.Join(dir, "nccl_trace_rank_0.tmp-write")
	e.r.readDumps(context.Background(), []watch.File{{Path: gone, Size: 4096, ModTime: time.Now(), Inode: 1}})
	assert.Equal(t, int64(0), badInputs(t, tel, semconv.NCCLSourceFlightRecorder, "unreadable"), "a vanished file is not counted")
	assert.Empty(t, e.obs.FilterMessageSnippet("cannot read dump").All(), "nor logged as a refusal")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "nccl_trace_rank_0"), frdumptest.Pickle(d), 0o644))
	require.Eventually(t, func() bool { return e.traces.SpanCount() == len(d.Entries) }, 20*time.Second, 10*time.Millisecond)
	assert.Equal(t, int64(0), badInputs(t, tel, semconv.NCCLSourceFlightRecorder, "unreadable"))
}
