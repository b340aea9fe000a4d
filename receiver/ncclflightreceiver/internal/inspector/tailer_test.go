package inspector

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// collLine is an inspector line shaped like the README's first example,
// with its own sequence number.
func collLine(seq int) string {
	return fmt.Sprintf(`{"header":{"id":"0x7f8c496ae9f661","rank":2,"n_ranks":8,"nnodes":1},"metadata":{"inspector_output_format_version":"v4.0","git_rev":"","rec_mechanism":"profiler_plugin","dump_timestamp_us":%d,"hostname":"example-hostname","pid":1639453},"coll_perf":{"coll":"AllReduce","coll_sn":%d,"coll_msg_size_bytes":17179869184,"coll_exec_time_us":61974,"coll_algobw_gbs":277.210914,"coll_busbw_gbs":485.119099}}`+"\n",
		1748030377748202+seq, seq)
}

func collLines(from, to int) string {
	var b strings.Builder
	for i := from; i < to; i++ {
		b.WriteString(collLine(i))
	}
	return b.String()
}

// harness is a Tailer over one file in a temporary directory, collecting
// what it emits.
type harness struct {
	t      *testing.T
	path   string
	tailer *Tailer
	logs   *observer.ObservedLogs
}

func newHarness(t *testing.T, opts Options) *harness {
	t.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	h := &harness{
		t:      t,
		path:   filepath.Join(t.TempDir(), "node1-pid42.log"),
		tailer: NewTailer(zap.New(core), opts),
		logs:   logs,
	}
	t.Cleanup(func() { assert.NoError(t, h.tailer.Close()) })
	return h
}

func (h *harness) append(s string) {
	h.t.Helper()
	f, err := os.OpenFile(h.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	require.NoError(h.t, err)
	_, err = f.WriteString(s)
	require.NoError(h.t, err)
	require.NoError(h.t, f.Close())
}

// poll returns the sequence numbers emitted by one Poll.
func (h *harness) poll() []int64 {
	h.t.Helper()
	seqs, err := pollSeqs(h.tailer)
	require.NoError(h.t, err)
	return seqs
}

func pollSeqs(t *Tailer) ([]int64, error) {
	var seqs []int64
	err := t.Poll(context.Background(), func(_ string, recs []Record) error {
		for _, r := range recs {
			seqs = append(seqs, r.Seq)
		}
		return nil
	})
	return seqs, err
}

func seqRange(from, to int) []int64 {
	var s []int64
	for i := from; i < to; i++ {
		s = append(s, int64(i))
	}
	return s
}

func TestTailerAppendsInChunks(t *testing.T) {
	h := newHarness(t, Options{})
	h.tailer.Track(h.path)
	h.append(collLines(0, 2))
	assert.Equal(t, seqRange(0, 2), h.poll())
	assert.Empty(t, h.poll(), "nothing new")

	// A line written in three pieces is read once, when complete.
	line := collLine(2)
	h.append(line[:10])
	assert.Empty(t, h.poll())
	h.append(line[10:200])
	assert.Empty(t, h.poll())
	h.append(line[200:] + collLine(3) + collLine(4)[:50])
	assert.Equal(t, seqRange(2, 4), h.poll())
	h.append(collLine(4)[50:])
	assert.Equal(t, []int64{4}, h.poll())

	st := h.tailer.State()[h.path]
	fi, err := os.Stat(h.path)
	require.NoError(t, err)
	assert.Equal(t, fi.Size(), st.Offset)
	assert.Equal(t, int64(5), h.tailer.Stats().Records)
}

func TestTailerManyChunks(t *testing.T) {
	h := newHarness(t, Options{MaxLineBytes: 1000}) // 64 KiB read buffer
	h.tailer.Track(h.path)
	h.append(collLines(0, 2000)) // ~700 KB
	var batches int
	var seqs []int64
	require.NoError(t, h.tailer.Poll(context.Background(), func(path string, recs []Record) error {
		assert.Equal(t, h.path, path)
		batches++
		for _, r := range recs {
			seqs = append(seqs, r.Seq)
		}
		return nil
	}))
	assert.Equal(t, seqRange(0, 2000), seqs)
	assert.Greater(t, batches, 5, "emitted one read buffer at a time")
}

func TestTailerTruncation(t *testing.T) {
	h := newHarness(t, Options{})
	h.tailer.Track(h.path)
	h.append(collLines(0, 3))
	assert.Equal(t, seqRange(0, 3), h.poll())

	require.NoError(t, os.Truncate(h.path, 0))
	h.append(collLine(100))
	assert.Equal(t, []int64{100}, h.poll())
	assert.Equal(t, int64(1), h.tailer.Stats().Truncations)
	assert.Equal(t, 1, h.logs.FilterMessageSnippet("truncated").Len())
}

// The plugin opens its file with fopen("w"): a new process that gets the
// same host name and pid rewrites the same inode, possibly past our offset
// before we look. The fingerprint catches it.
func TestTailerRewrittenInPlace(t *testing.T) {
	h := newHarness(t, Options{})
	h.tailer.Track(h.path)
	h.append(collLines(0, 2))
	assert.Equal(t, seqRange(0, 2), h.poll())

	require.NoError(t, os.WriteFile(h.path, []byte(collLines(500, 505)), 0o600))
	assert.Equal(t, seqRange(500, 505), h.poll())
	assert.Equal(t, int64(1), h.tailer.Stats().Replacements)
	assert.Equal(t, 1, h.logs.FilterMessageSnippet("rewritten").Len())
}

func TestTailerRotation(t *testing.T) {
	h := newHarness(t, Options{})
	h.tailer.Track(h.path)
	h.append(collLines(0, 2))
	assert.Equal(t, seqRange(0, 2), h.poll())

	// Lines appended, then the file renamed away before we read them, and
	// a new file created under the name.
	h.append(collLines(2, 4) + "{partial")
	require.NoError(t, os.Rename(h.path, h.path+".1"))
	h.append(collLines(10, 12))
	assert.Equal(t, []int64{2, 3, 10, 11}, h.poll(), "the old file's rest, then the new file")
	assert.Equal(t, int64(1), h.tailer.Stats().Replacements)

	h.append(collLine(12))
	assert.Equal(t, []int64{12}, h.poll())
}

func TestTailerDeletion(t *testing.T) {
	h := newHarness(t, Options{})
	h.tailer.Track(h.path)
	h.append(collLines(0, 1))
	assert.Equal(t, []int64{0}, h.poll())

	h.append(collLines(1, 3))
	require.NoError(t, os.Remove(h.path))
	assert.Equal(t, []int64{1, 2}, h.poll(), "the open file is read to its end")
	assert.Empty(t, tracked(h.tailer))
	assert.NotContains(t, h.tailer.State(), h.path)

	// A tracked path that never existed is forgotten quietly.
	h.tailer.Track(h.path + ".nope")
	assert.Empty(t, h.poll())
	assert.Empty(t, tracked(h.tailer))
}

func TestTailerRestartWithoutDuplicates(t *testing.T) {
	h := newHarness(t, Options{})
	h.tailer.Track(h.path)
	h.append(collLines(0, 3) + collLine(3)[:40]) // a partial line at save time
	assert.Equal(t, seqRange(0, 3), h.poll())
	saved, err := MarshalState(h.tailer.State())
	require.NoError(t, err)

	h.append(collLine(3)[40:] + collLine(4))
	restored, err := UnmarshalState(saved)
	require.NoError(t, err)
	next := NewTailer(zap.NewNop(), Options{})
	defer func() { assert.NoError(t, next.Close()) }()
	next.Restore(restored)
	next.Track(h.path) // the directory scan finds it again: no effect
	seqs, err := pollSeqs(next)
	require.NoError(t, err)
	assert.Equal(t, []int64{3, 4}, seqs)
	assert.Zero(t, next.Stats().Replacements)
}

func TestTailerRestoreDetectsReplacedFile(t *testing.T) {
	tests := []struct {
		name    string
		replace func(h *harness)
	}{
		{"deleted and re-created", func(h *harness) {
			require.NoError(t, os.Remove(h.path))
			h.append(collLines(100, 110)) // longer than before: size alone would not tell
		}},
		{"truncated below the offset", func(h *harness) {
			require.NoError(t, os.WriteFile(h.path, []byte(collLines(100, 101)), 0o600))
		}},
		{"rewritten in place past the offset", func(h *harness) {
			require.NoError(t, os.WriteFile(h.path, []byte(collLines(100, 110)), 0o600))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Options{})
			h.tailer.Track(h.path)
			h.append(collLines(0, 3))
			assert.Equal(t, seqRange(0, 3), h.poll())
			state := h.tailer.State()
			require.NoError(t, h.tailer.Close())

			tt.replace(h)
			next := NewTailer(zap.NewNop(), Options{})
			defer func() { assert.NoError(t, next.Close()) }()
			next.Restore(state)
			seqs, err := pollSeqs(next)
			require.NoError(t, err)
			assert.Equal(t, int64(100), seqs[0], "read from the start")
			st := next.Stats()
			assert.Equal(t, int64(1), st.Replacements+st.Truncations)
		})
	}
}

func TestTailerOverlongLines(t *testing.T) {
	h := newHarness(t, Options{MaxLineBytes: 600})
	h.tailer.Track(h.path)
	long := `{"coll_perf":{"coll":"AllReduce","pad":"` + strings.Repeat("x", 700) + `"}}` + "\n"
	h.append(collLine(0) + long + collLine(1) + long)
	assert.Equal(t, []int64{0, 1}, h.poll())

	// An over-long line still being written: skipped as it comes, across
	// polls and across a restart.
	h.append(long[:650])
	assert.Empty(t, h.poll())
	st := h.tailer.State()
	assert.True(t, st[h.path].SkipToNewline)
	next := NewTailer(zap.NewNop(), Options{MaxLineBytes: 600})
	defer func() { assert.NoError(t, next.Close()) }()
	next.Restore(st)
	h.append(long[650:] + collLine(2))
	seqs, err := pollSeqs(next)
	require.NoError(t, err)
	assert.Equal(t, []int64{2}, seqs)

	assert.Equal(t, int64(3), h.tailer.Stats().Overlong)
	assert.Equal(t, 1, h.logs.FilterLevelExact(zapcore.WarnLevel).FilterMessageSnippet("over-long").Len(), "warned once")
	assert.Equal(t, 2, h.logs.FilterLevelExact(zapcore.DebugLevel).FilterMessageSnippet("over-long").Len())
}

func TestTailerMalformedAndOtherLines(t *testing.T) {
	h := newHarness(t, Options{})
	h.tailer.Track(h.path)
	h.append(collLine(0) + "not json\n\n  \r\n" + `{"proxy_trace":{"record_sn":1}}` + "\n" +
		`{"coll_perf":{"coll_sn":"x"}}` + "\n" + strings.TrimSuffix(collLine(1), "\n") + "\r\n")
	assert.Equal(t, []int64{0, 1}, h.poll())
	st := h.tailer.Stats()
	assert.Equal(t, int64(2), st.Malformed)
	assert.Equal(t, int64(1), st.Other)
	warn := h.logs.FilterLevelExact(zapcore.WarnLevel).FilterMessageSnippet("malformed").All()
	require.Len(t, warn, 1)
	assert.Equal(t, h.path, warn[0].ContextMap()["path"])
	assert.Equal(t, int64(len(collLine(0))), warn[0].ContextMap()["offset"])
	assert.Equal(t, 1, h.logs.FilterLevelExact(zapcore.DebugLevel).FilterMessageSnippet("malformed").Len())
}

func TestTailerEmitErrorRetries(t *testing.T) {
	h := newHarness(t, Options{})
	h.tailer.Track(h.path)
	h.append(collLines(0, 2))
	failure := errors.New("pipeline full")
	err := h.tailer.Poll(context.Background(), func(string, []Record) error { return failure })
	require.ErrorIs(t, err, failure)
	assert.Contains(t, err.Error(), h.path)
	assert.Zero(t, h.tailer.State()[h.path].Offset)
	assert.Equal(t, seqRange(0, 2), h.poll(), "delivered again")
}

func TestTailerContextCancelled(t *testing.T) {
	h := newHarness(t, Options{})
	h.tailer.Track(h.path)
	h.append(collLines(0, 2))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := h.tailer.Poll(ctx, func(string, []Record) error {
		t.Fatal("nothing is emitted after cancellation")
		return nil
	})
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, seqRange(0, 2), h.poll())
}

// The newer layout: perf lines without header and metadata inherit the last
// dump_stats marker's, also across a restart.
func TestTailerInheritsDumpStatsContext(t *testing.T) {
	h := newHarness(t, Options{})
	h.tailer.Track(h.path)
	marker := `{"header":{"id":"0x1","comm_name":"DP","rank":3,"n_ranks":4,"nnodes":1},"metadata":{"inspector_output_format_version":"v4.4","dump_timestamp_us":7,"hostname":"h","pid":9},"dump_stats":{"coll_records":2,"coll_dropped_since_last_dump":5}}` + "\n"
	perf := func(seq int) string {
		return fmt.Sprintf(`{"coll_perf":{"coll":"AllReduce","coll_sn":%d}}`+"\n", seq)
	}
	h.append(marker + perf(1))
	var recs []Record
	collect := func(_ string, rs []Record) error { recs = append(recs, rs...); return nil }
	require.NoError(t, h.tailer.Poll(context.Background(), collect))
	require.Len(t, recs, 2)
	assert.Equal(t, KindDumpStats, recs[0].Kind)
	assert.Equal(t, int64(5), recs[0].DumpStats.CollDroppedSinceLastDump)
	assert.Equal(t, 3, recs[1].Rank)
	assert.Equal(t, "DP", recs[1].CommName)
	assert.Equal(t, 9, recs[1].PID)

	state := h.tailer.State()
	require.NotNil(t, state[h.path].Header)
	saved, err := MarshalState(state)
	require.NoError(t, err)
	restored, err := UnmarshalState(saved)
	require.NoError(t, err)
	next := NewTailer(zap.NewNop(), Options{})
	defer func() { assert.NoError(t, next.Close()) }()
	next.Restore(restored)
	h.append(perf(2))
	recs = nil
	require.NoError(t, next.Poll(context.Background(), collect))
	require.Len(t, recs, 1)
	assert.Equal(t, int64(2), recs[0].Seq)
	assert.Equal(t, 3, recs[0].Rank)
	assert.Equal(t, "h", recs[0].Hostname)
}

func TestTailerTracksSeveralFiles(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a-pid1.log"), filepath.Join(dir, "b-pid2.log")
	require.NoError(t, os.WriteFile(a, []byte(collLines(0, 2)), 0o600))
	require.NoError(t, os.WriteFile(b, []byte(collLines(5, 6)), 0o600))
	tl := NewTailer(zap.NewNop(), Options{})
	defer func() { assert.NoError(t, tl.Close()) }()
	paths, err := Scan(dir, "")
	require.NoError(t, err)
	tl.Track(paths...)
	got := map[string]int{}
	require.NoError(t, tl.Poll(context.Background(), func(p string, recs []Record) error {
		got[p] += len(recs)
		return nil
	}))
	assert.Equal(t, map[string]int{a: 2, b: 1}, got)

	// A file that goes away is closed and no longer followed.
	require.NoError(t, os.Remove(a))
	require.NoError(t, tl.Poll(context.Background(), func(string, []Record) error { return nil }))
	assert.Equal(t, []string{b}, tracked(tl))
}

// tracked returns the paths tl follows, sorted: those its State holds.
func tracked(tl *Tailer) []string {
	return slices.Sorted(maps.Keys(tl.State()))
}

// BenchmarkTailerPoll reads a 4 MB file from the start: file reads, line
// splitting and parsing together.
func BenchmarkTailerPoll(b *testing.B) {
	path := filepath.Join(b.TempDir(), "h-pid1.log")
	data := benchmarkInput(b)
	require.NoError(b, os.WriteFile(path, data, 0o600))
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		tl := NewTailer(zap.NewNop(), Options{})
		tl.Track(path)
		var n int
		if err := tl.Poll(context.Background(), func(_ string, recs []Record) error { n += len(recs); return nil }); err != nil {
			b.Fatal(err)
		}
		if n == 0 {
			b.Fatal("no records")
		}
		require.NoError(b, tl.Close())
	}
}

func TestNewTailerClampsOptions(t *testing.T) {
	tl := NewTailer(zap.NewNop(), Options{MaxLineBytes: 1 << 40, FingerprintBytes: 1 << 30})
	assert.Equal(t, 64<<20, tl.opts.MaxLineBytes)
	assert.Equal(t, 64<<10, tl.opts.FingerprintBytes)
	tl = NewTailer(zap.NewNop(), Options{})
	assert.Equal(t, DefaultMaxLineBytes, tl.opts.MaxLineBytes)
	assert.Equal(t, DefaultFingerprintBytes, tl.opts.FingerprintBytes)
}
