package ncclflightreceiver

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump/frdumptest"
)

// A training script asks for a dump every N steps: each new dump repeats
// most of the last one (the ring buffer). Every operation is emitted once,
// and one still running in the first dump is emitted when the second shows
// it completed.
func TestSteadyStreamOfDumpsEmitsEachOperationOnce(t *testing.T) {
	full := parseFixture(t, "dp8-straggler5-v2.10", 3)
	require.Len(t, full.Entries, 50)
	first := *full
	first.Entries = append([]frdump.Entry(nil), full.Entries[:30]...)
	first.Entries[29].State = frdump.StateStarted // still running at the first dump
	first.Entries[29].HasDuration = false
	first.Entries[29].Retired = false

	dir := t.TempDir()
	path := filepath.Join(dir, "host-b_nccl_trace_rank_3")
	require.NoError(t, os.WriteFile(path, frdumptest.Pickle(&first), 0o644))
	store := &memStorage{data: map[string][]byte{}}
	e := startReceiver(t, fastConfig(dir), store)
	defer e.stop(t)
	require.Eventually(t, func() bool { return e.traces.SpanCount() == 29 }, 20*time.Second, 10*time.Millisecond)

	second := *full
	second.Entries = append([]frdump.Entry(nil), full.Entries[10:]...) // the buffer wrapped
	tmp := filepath.Join(dir, ".next")
	require.NoError(t, os.WriteFile(tmp, frdumptest.Pickle(&second), 0o644))
	require.NoError(t, os.Rename(tmp, path))
	require.Eventually(t, func() bool { return e.traces.SpanCount() == 50 }, 20*time.Second, 10*time.Millisecond)
	time.Sleep(200 * time.Millisecond)
	assert.Equal(t, 50, e.traces.SpanCount(), "no operation twice")

	// The saved state keeps the path's latest version only: a job that
	// dumps every few steps must not grow what is rewritten after each dump.
	st, err := loadState(context.Background(), &memClient{m: store})
	require.NoError(t, err)
	require.Len(t, st.Dumps, 1)
	info, err := os.Stat(path)
	require.NoError(t, err)
	assert.Contains(t, st.Dumps[path].Key, "|"+strconv.FormatInt(info.Size(), 10)+"|", "the second dump's version")
}

// Dumps over the size cap and of an unknown version: a warning each, once.
func TestOversizedAndUnknownVersionDumps(t *testing.T) {
	dir := t.TempDir()
	d := parseFixture(t, "dp4-healthy-v2.7", 0)
	d.Version = frdump.Version{Major: 3, Minor: 0, Raw: "3.0"}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "nccl_trace_rank_0"), frdumptest.Pickle(d), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "nccl_trace_rank_1"), make([]byte, 2<<20), 0o644))
	cfg := fastConfig(dir)
	cfg.FlightRecorder.MaxFileSize = 1 << 20
	e := startReceiver(t, cfg, &memStorage{data: map[string][]byte{}})
	defer e.stop(t)
	require.Eventually(t, func() bool {
		return e.obs.FilterMessageSnippet("cannot read dump").Len() == 1 && e.obs.FilterMessageSnippet("warning").Len() >= 1
	}, 20*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { return e.traces.SpanCount() == len(d.Entries) }, 20*time.Second, 10*time.Millisecond,
		"an unknown version is parsed for what is known")
	assert.Contains(t, e.obs.FilterMessageSnippet("cannot read dump").All()[0].ContextMap()["error"], "size cap")
}

// The NCCL inspector's real lines become spans and bandwidth metrics.
func TestInspectorInput(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile(filepath.Join("internal", "inspector", "testdata", "readme-examples.v4.0.jsonl"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "example-hostname-pid1639453.log"), data, 0o644))
	cfg := createDefaultConfig().(*Config)
	cfg.Inspector.Directories = []string{dir}
	cfg.Inspector.PollInterval = 20 * time.Millisecond
	e := startReceiver(t, cfg, &memStorage{data: map[string][]byte{}})
	defer e.stop(t)
	lines := strings.Count(strings.TrimSpace(string(data)), "\n") + 1
	require.Eventually(t, func() bool { return e.traces.SpanCount() == lines }, 20*time.Second, 10*time.Millisecond)
	var bw bool
	for _, md := range e.metrics.AllMetrics() {
		rms := md.ResourceMetrics()
		for i := 0; i < rms.Len(); i++ {
			ms := rms.At(i).ScopeMetrics().At(0).Metrics()
			for j := 0; j < ms.Len(); j++ {
				if ms.At(j).Name() == metricBusBandwidth && ms.At(j).Type() == pmetric.MetricTypeGauge {
					bw = true
				}
			}
		}
	}
	assert.True(t, bw, "bus bandwidth from the inspector")

	// Appending a line emits only that line.
	f, err := os.OpenFile(filepath.Join(dir, "example-hostname-pid1639453.log"), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	first := strings.SplitN(string(data), "\n", 2)[0]
	_, err = f.WriteString(strings.Replace(first, `"coll_sn":1407`, `"coll_sn":1408`, 1) + "\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.Eventually(t, func() bool { return e.traces.SpanCount() == lines+1 }, 20*time.Second, 10*time.Millisecond)
}

// A RAS service reporting a missing rank: reported once it persisted across
// two polls, and only once.
func TestRASInput(t *testing.T) {
	status, err := os.ReadFile(filepath.Join("internal", "ras", "testdata", "ras-status.json"))
	require.NoError(t, err)
	require.True(t, json.Valid(status))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			serveRAS(conn, status)
		}
	}()
	defer func() { ln.Close(); <-done }()

	cfg := createDefaultConfig().(*Config)
	cfg.RAS.Endpoint = ln.Addr().String()
	cfg.RAS.Interval = 30 * time.Millisecond
	e := startReceiver(t, cfg, &memStorage{data: map[string][]byte{}})
	require.Eventually(t, func() bool { return e.logs.LogRecordCount() >= 1 }, 20*time.Second, 10*time.Millisecond)
	time.Sleep(200 * time.Millisecond)
	e.stop(t)
	recs := findings(e.logs.AllLogs())
	require.Len(t, recs, 1, "one finding however many polls")
	assert.Equal(t, semconv.NCCLSourceRAS, attrStr(recs[0], semconv.AttrNCCLSource))
	assert.Contains(t, recs[0].Body().Str(), "1")
}

// serveRAS answers one client the way NCCL's RAS does: protocol handshake,
// OK to settings, then the STATUS document and close.
func serveRAS(conn net.Conn, status []byte) {
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(conn)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		cmd := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(cmd, "CLIENT PROTOCOL"):
			_, _ = conn.Write([]byte("SERVER PROTOCOL 2\n"))
		case strings.HasPrefix(cmd, "TIMEOUT"), strings.HasPrefix(cmd, "SET FORMAT"):
			_, _ = conn.Write([]byte("OK\n"))
		case cmd == "STATUS":
			_, _ = conn.Write(status)
			return
		default:
			_, _ = conn.Write([]byte("ERROR: unknown command\n"))
		}
	}
}
