package kmsg

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/source/kmsg/kmsgtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fixtureBoot is when the machine of the fixture booted, for the synthetic
// /dev/kmsg records: three days before its first line.
var fixtureBoot = time.Date(2025, 2, 20, 16, 0, 0, 0, time.UTC)

// fixtureKmsg turns the dmesg -T fixture into /dev/kmsg records with
// timestamps relative to fixtureBoot, adding what the real device also
// holds: dictionary lines, a user-space record and one malformed line.
func fixtureKmsg(t testing.TB) string {
	t.Helper()
	var b strings.Builder
	for i, line := range fixtureLines(t) {
		at, msg, ok := kmsgtest.ParseDmesgLine(line, time.UTC)
		require.True(t, ok)
		b.WriteString(formatRecord(Record{Level: 3, Seq: uint64(1000 + i), SinceBoot: at.Sub(fixtureBoot), Message: msg}))
		if i == 0 {
			b.WriteString(" SUBSYSTEM=pci\n DEVICE=+pci:0000:9b:00.0\n")
		}
	}
	b.WriteString("14,2000,259200000000,-;systemd[1]: Started nvidia-persistenced.service.\n")
	b.WriteString("not a kmsg record\n")
	return b.String()
}

// wantFixtureEvents is what the Reader must deliver for fixtureKmsg.
func wantFixtureEvents() []model.XIDEvent {
	out := make([]model.XIDEvent, len(fixtureXIDs))
	for i, ev := range fixtureXIDs {
		out[i] = model.XIDEvent{
			Time: fixtureXIDTimes[i], GPU: model.GPU{PCIBusID: "00000000:9b:00.0"}, Code: 119,
			Message: ev.Message, PID: ev.PID, ProcessName: ev.ProcessName, Source: "kmsg",
		}
	}
	return out
}

// collector is a sink that keeps what it gets.
type collector struct {
	mu     sync.Mutex
	events []model.XIDEvent
	got    chan struct{}
}

func newCollector() *collector { return &collector{got: make(chan struct{}, 100)} }

func (c *collector) sink(ev model.XIDEvent) {
	c.mu.Lock()
	c.events = append(c.events, ev)
	c.mu.Unlock()
	c.got <- struct{}{}
}

func (c *collector) all() []model.XIDEvent {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]model.XIDEvent(nil), c.events...)
}

// waitFor waits until n events have arrived in all.
func (c *collector) waitFor(t *testing.T, n int) {
	t.Helper()
	for len(c.all()) < n {
		select {
		case <-c.got:
		case <-time.After(5 * time.Second):
			t.Fatalf("got %d events, want %d", len(c.all()), n)
		}
	}
}

// assertEventsEqual compares events with time.Equal for the times.
func assertEventsEqual(t *testing.T, want, got []model.XIDEvent) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		assert.True(t, want[i].Time.Equal(got[i].Time), "event %d: time %v, want %v", i, got[i].Time, want[i].Time)
		g := got[i]
		g.Time = want[i].Time
		assert.Equal(t, want[i], g, "event %d", i)
	}
}

func newTestReader(t *testing.T, opts Options) (*Reader, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.DebugLevel)
	r := New(zap.New(core), opts)
	r.bootTime = func() (time.Time, error) { return fixtureBoot, nil }
	r.now = func() time.Time { t.Error("the clock must not be read when boot time is known"); return time.Time{} }
	return r, logs
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kmsg")
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

func TestReaderFixtureFile(t *testing.T) {
	r, logs := newTestReader(t, Options{Path: writeFile(t, fixtureKmsg(t)), FromStart: true})
	c := newCollector()
	require.NoError(t, r.Run(context.Background(), c.sink), "a file that ends ends Run")

	assertEventsEqual(t, wantFixtureEvents(), c.all())
	assert.Equal(t, Stats{Records: 43 + 2, XIDs: 5, Malformed: 1}, r.Stats())
	malformed := logs.FilterMessageSnippet("malformed").All()
	require.Len(t, malformed, 1)
	assert.Equal(t, zapcore.WarnLevel, malformed[0].Level)
}

// The kernel hands out one whole record per read; a file or pipe may split
// records anywhere. Both must give the same events.
func TestReaderSplitReads(t *testing.T) {
	content := fixtureKmsg(t)
	for name, wrap := range map[string]func(io.Reader) io.Reader{
		"one byte per read": iotest.OneByteReader,
		"half reads":        iotest.HalfReader,
		"one record per read": func(io.Reader) io.Reader {
			return &recordReader{records: splitRecords(content)}
		},
	} {
		t.Run(name, func(t *testing.T) {
			r, _ := newTestReader(t, Options{Path: "fake", FromStart: true})
			r.open = func(string) (io.ReadCloser, error) {
				return io.NopCloser(wrap(strings.NewReader(content))), nil
			}
			c := newCollector()
			require.NoError(t, r.Run(context.Background(), c.sink))
			assertEventsEqual(t, wantFixtureEvents(), c.all())
			assert.Equal(t, uint64(1), r.Stats().Malformed)
		})
	}
}

// splitRecords cuts /dev/kmsg text into records (header plus dictionary lines).
func splitRecords(s string) []string {
	var out []string
	for line := range strings.Lines(s) {
		if strings.HasPrefix(line, " ") && len(out) > 0 {
			out[len(out)-1] += line
			continue
		}
		out = append(out, line)
	}
	return out
}

// recordReader behaves like /dev/kmsg: each Read returns one record, or
// EINVAL when the buffer cannot hold it, and scripted errors in between.
type recordReader struct {
	records []string
	errs    map[int]error // returned before record i, once
	calls   int
	closed  bool
}

func (r *recordReader) Read(p []byte) (int, error) {
	r.calls++
	if len(r.records) == 0 {
		return 0, io.EOF
	}
	if err, ok := r.errs[len(r.records)]; ok {
		delete(r.errs, len(r.records))
		return 0, err
	}
	if len(p) < len(r.records[0]) {
		return 0, syscall.EINVAL
	}
	n := copy(p, r.records[0])
	r.records = r.records[1:]
	return n, nil
}

func (r *recordReader) Close() error { r.closed = true; return nil }

func TestReaderProcStatBootTime(t *testing.T) {
	stat := filepath.Join(t.TempDir(), "stat")
	require.NoError(t, os.WriteFile(stat, []byte(fmt.Sprintf("cpu 1 2\nbtime %d\n", fixtureBoot.Unix())), 0o600))
	core, _ := observer.New(zapcore.DebugLevel)
	r := New(zap.New(core), Options{Path: writeFile(t, fixtureKmsg(t)), ProcStatPath: stat, FromStart: true})
	c := newCollector()
	require.NoError(t, r.Run(context.Background(), c.sink))
	assertEventsEqual(t, wantFixtureEvents(), c.all())
}

func TestReaderBootTimeUnknown(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	r := New(zap.New(core), Options{
		Path:         writeFile(t, fixtureKmsg(t)),
		ProcStatPath: filepath.Join(t.TempDir(), "no-stat"),
		FromStart:    true,
	})
	readAt := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r.now = func() time.Time { return readAt }
	c := newCollector()
	require.NoError(t, r.Run(context.Background(), c.sink))

	got := c.all()
	require.Len(t, got, 5)
	for _, ev := range got {
		assert.Equal(t, readAt, ev.Time, "without boot time an event is timed when read")
	}
	warnings := logs.FilterMessageSnippet("Boot time unknown").All()
	require.Len(t, warnings, 1)
	assert.Equal(t, zapcore.WarnLevel, warnings[0].Level)
}

func TestReaderStartsAtEnd(t *testing.T) {
	r, _ := newTestReader(t, Options{Path: writeFile(t, fixtureKmsg(t))})
	c := newCollector()
	require.NoError(t, r.Run(context.Background(), c.sink))
	assert.Empty(t, c.all(), "records already in the log are not replayed")
	assert.Equal(t, Stats{}, r.Stats())
}

func TestReaderSeekFailureWarns(t *testing.T) {
	r, logs := newTestReader(t, Options{Path: "fake"})
	r.open = func(string) (io.ReadCloser, error) {
		return badSeeker{io.NopCloser(strings.NewReader(fixtureKmsg(t)))}, nil
	}
	c := newCollector()
	require.NoError(t, r.Run(context.Background(), c.sink))
	assert.Len(t, c.all(), 5, "records that could not be skipped are still reported")
	assert.Len(t, logs.FilterMessageSnippet("Cannot skip to the end").All(), 1)
}

type badSeeker struct{ io.ReadCloser }

func (badSeeker) Seek(int64, int) (int64, error) { return 0, syscall.EINVAL }

func TestReaderNoPrivileges(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.EACCES, syscall.EPERM} {
		t.Run("open "+errno.Error(), func(t *testing.T) {
			r, logs := newTestReader(t, Options{Path: "/dev/kmsg"})
			opens := 0
			r.open = func(path string) (io.ReadCloser, error) {
				opens++
				return nil, &fs.PathError{Op: "open", Path: path, Err: errno}
			}
			c := newCollector()
			require.NoError(t, r.Run(context.Background(), c.sink))
			assert.Equal(t, 1, opens, "no retry loop")
			assert.Empty(t, c.all())
			all := logs.All()
			require.Len(t, all, 1, "exactly one log line")
			assert.Equal(t, zapcore.WarnLevel, all[0].Level)
			assert.Contains(t, all[0].Message, "No privileges")
		})
		t.Run("read "+errno.Error(), func(t *testing.T) {
			r, logs := newTestReader(t, Options{Path: "/dev/kmsg", FromStart: true})
			rr := &recordReader{records: splitRecords(fixtureKmsg(t))[:1], errs: map[int]error{1: errno}}
			r.open = func(string) (io.ReadCloser, error) { return rr, nil }
			require.NoError(t, r.Run(context.Background(), newCollector().sink))
			assert.Equal(t, 1, rr.calls, "stops at the first refusal")
			assert.True(t, rr.closed)
			assert.Len(t, logs.FilterMessageSnippet("No privileges").All(), 1)
		})
	}
}

func TestReaderOverwritten(t *testing.T) {
	records := splitRecords(fixtureKmsg(t))
	r, logs := newTestReader(t, Options{Path: "/dev/kmsg", FromStart: true})
	// EPIPE twice: before the 3rd record from the end and before the last.
	rr := &recordReader{records: records, errs: map[int]error{3: syscall.EPIPE, 1: syscall.EPIPE}}
	r.open = func(string) (io.ReadCloser, error) { return rr, nil }
	c := newCollector()
	require.NoError(t, r.Run(context.Background(), c.sink))
	assert.Len(t, c.all(), 5, "reading goes on after EPIPE")
	assert.Equal(t, uint64(2), r.Stats().Overwritten)
	warnings := logs.FilterMessageSnippet("overwritten").All()
	require.Len(t, warnings, 1, "logged once")
	assert.Equal(t, zapcore.WarnLevel, warnings[0].Level)
}

func TestReaderLongRecordGrowsBuffer(t *testing.T) {
	msg := "NVRM: Xid (PCI:0000:9b:00): 79, pid=1, name=x, " + strings.Repeat("fallen ", 3000)
	records := []string{formatRecord(Record{Level: 3, Seq: 1, SinceBoot: time.Second, Message: msg})}
	require.Greater(t, len(records[0]), readBufSize)
	r, _ := newTestReader(t, Options{Path: "/dev/kmsg", FromStart: true})
	r.open = func(string) (io.ReadCloser, error) { return &recordReader{records: records}, nil }
	c := newCollector()
	require.NoError(t, r.Run(context.Background(), c.sink))
	got := c.all()
	require.Len(t, got, 1)
	assert.Equal(t, 79, got[0].Code)
	assert.Equal(t, strings.TrimSpace(strings.Repeat("fallen ", 3000)), got[0].Message)
	assert.Equal(t, fixtureBoot.Add(time.Second), got[0].Time)
}

func TestReaderLongLineDropped(t *testing.T) {
	content := strings.Repeat("x", 3*maxLineSize) + "\n" +
		formatRecord(Record{Level: 3, Seq: 1, SinceBoot: time.Second, Message: "NVRM: Xid (PCI:0000:9b:00): 79, gone"})
	r, logs := newTestReader(t, Options{Path: writeFile(t, content), FromStart: true})
	c := newCollector()
	require.NoError(t, r.Run(context.Background(), c.sink))
	got := c.all()
	require.Len(t, got, 1, "the record after the endless line still arrives")
	assert.Equal(t, "gone", got[0].Message)
	assert.GreaterOrEqual(t, r.Stats().Malformed, uint64(1))
	assert.Len(t, logs.FilterMessageSnippet("too long").All(), 1)
}

func TestReaderErrors(t *testing.T) {
	t.Run("missing device", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "kmsg")
		r, _ := newTestReader(t, Options{Path: path})
		err := r.Run(context.Background(), newCollector().sink)
		require.ErrorIs(t, err, fs.ErrNotExist)
		assert.ErrorContains(t, err, "dcgmreceiver: kmsg: opening "+path)
	})
	t.Run("read error", func(t *testing.T) {
		r, _ := newTestReader(t, Options{Path: "/dev/kmsg", FromStart: true})
		rr := &recordReader{records: []string{"x\n"}, errs: map[int]error{1: syscall.EIO}}
		r.open = func(string) (io.ReadCloser, error) { return rr, nil }
		err := r.Run(context.Background(), newCollector().sink)
		require.ErrorIs(t, err, syscall.EIO)
		assert.ErrorContains(t, err, "dcgmreceiver: kmsg: reading /dev/kmsg")
		assert.True(t, rr.closed)
	})
	t.Run("no progress", func(t *testing.T) {
		r, _ := newTestReader(t, Options{Path: "/dev/kmsg", FromStart: true})
		r.open = func(string) (io.ReadCloser, error) { return io.NopCloser(emptyReader{}), nil }
		err := r.Run(context.Background(), newCollector().sink)
		require.ErrorIs(t, err, io.ErrNoProgress)
	})
}

type emptyReader struct{}

func (emptyReader) Read([]byte) (int, error) { return 0, nil }

func TestReaderCancelledBeforeRun(t *testing.T) {
	r, _ := newTestReader(t, Options{})
	r.open = func(string) (io.ReadCloser, error) { t.Fatal("opened after cancellation"); return nil, nil }
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.NoError(t, r.Run(ctx, newCollector().sink))
}

// runAsync starts Run and returns a channel with its result.
func runAsync(ctx context.Context, r *Reader, c *collector) <-chan error {
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, c.sink) }()
	return done
}

func waitDone(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		require.NoError(t, err, "cancellation is not an error")
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancellation")
	}
}

// A blocked read (a pipe with nothing in it, like /dev/kmsg on a quiet
// machine) ends when ctx is cancelled.
func TestReaderCancelUnblocksRead(t *testing.T) {
	pr, pw, err := os.Pipe()
	require.NoError(t, err)
	defer pw.Close()
	r, _ := newTestReader(t, Options{Path: "pipe"})
	r.open = func(string) (io.ReadCloser, error) { return pr, nil }
	c := newCollector()
	ctx, cancel := context.WithCancel(context.Background())
	done := runAsync(ctx, r, c)

	_, err = pw.WriteString(fixtureKmsg(t))
	require.NoError(t, err)
	c.waitFor(t, 5)
	cancel()
	waitDone(t, done)
	assertEventsEqual(t, wantFixtureEvents(), c.all())
	_, err = pw.WriteString("more\n")
	assert.Error(t, err, "the reading end was closed")
}

// The same through a real fifo opened by path: os.File's poller, a Seek that
// fails with ESPIPE (ignored), records that arrive after the start.
func TestReaderFifo(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kmsg")
	require.NoError(t, syscall.Mkfifo(path, 0o600))
	// O_RDWR keeps a writer on the fifo without blocking, so the Reader's
	// open does not wait and its reads block instead of seeing EOF.
	w, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer w.Close()

	r, logs := newTestReader(t, Options{Path: path})
	c := newCollector()
	ctx, cancel := context.WithCancel(context.Background())
	done := runAsync(ctx, r, c)

	records := splitRecords(fixtureKmsg(t))
	for _, rec := range records {
		_, err := w.WriteString(rec)
		require.NoError(t, err)
	}
	c.waitFor(t, 5)
	require.Eventually(t, func() bool { return r.Stats().Malformed == 1 }, 5*time.Second, time.Millisecond)
	cancel()
	waitDone(t, done)
	assertEventsEqual(t, wantFixtureEvents(), c.all())
	assert.Empty(t, logs.FilterMessageSnippet("Cannot skip").All(), "ESPIPE from a fifo is expected")
	assert.Equal(t, uint64(len(records)), r.Stats().Records)
}

func TestNewDefaults(t *testing.T) {
	r := New(zap.NewNop(), Options{})
	assert.Equal(t, DefaultPath, r.opts.Path)
	assert.Equal(t, DefaultProcStatPath, r.opts.ProcStatPath)
	assert.False(t, r.opts.FromStart)
	assert.Equal(t, "kmsg", SourceName)
}
