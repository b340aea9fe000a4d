package shutdowndeadlineextension

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-gpu/otelcol-gpu/extension/shutdowndeadlineextension/internal/metadata"
)

// fakeTimer is the deadline's clock in the tests: it records what is
// armed, and expire runs the timer's function as time.AfterFunc would.
type fakeTimer struct {
	mu      sync.Mutex
	armed   []time.Duration
	f       func()
	stopped bool
}

func (ft *fakeTimer) afterFunc(d time.Duration, f func()) func() bool {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	ft.armed, ft.f = append(ft.armed, d), f
	return func() bool {
		ft.mu.Lock()
		defer ft.mu.Unlock()
		was := !ft.stopped
		ft.stopped = true
		return was
	}
}

func (ft *fakeTimer) state() (armed []time.Duration, stopped bool) {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	return append([]time.Duration(nil), ft.armed...), ft.stopped
}

// expire runs the armed function, even after Stop: a timer that fired as
// it was stopped.
func (ft *fakeTimer) expire(t *testing.T) {
	t.Helper()
	ft.mu.Lock()
	f := ft.f
	ft.mu.Unlock()
	require.NotNil(t, f, "no deadline armed")
	f()
}

// syncCountingCore counts Sync calls and the records written before the
// first, so that a test sees the record flushed before the exit.
type syncCountingCore struct {
	zapcore.Core
	mu    *sync.Mutex
	syncs *int
}

func (c syncCountingCore) With(fields []zapcore.Field) zapcore.Core {
	return syncCountingCore{Core: c.Core.With(fields), mu: c.mu, syncs: c.syncs}
}

func (c syncCountingCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c syncCountingCore) Sync() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	*c.syncs++
	return c.Core.Sync()
}

// rig is one extension on a fake timer, its log and its exits.
type rig struct {
	ext   *deadline
	timer *fakeTimer
	logs  *observer.ObservedLogs

	mu    sync.Mutex
	syncs int
	exits []int
	// syncsAtExit is how many times the logger was flushed when exit was
	// called.
	syncsAtExit []int
}

func newRig(t *testing.T, cfg *Config) *rig {
	t.Helper()
	r := &rig{timer: &fakeTimer{}}
	core, logs := observer.New(zap.InfoLevel)
	r.logs = logs
	set := extensiontest.NewNopSettings(metadata.Type)
	set.Logger = zap.New(syncCountingCore{Core: core, mu: &r.mu, syncs: &r.syncs})
	exit := func(code int) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.exits = append(r.exits, code)
		r.syncsAtExit = append(r.syncsAtExit, r.syncs)
	}
	ext, err := newFactory(exit, r.timer.afterFunc).Create(context.Background(), set, cfg)
	require.NoError(t, err)
	r.ext = ext.(*deadline)
	require.NoError(t, r.ext.Start(context.Background(), componenttest.NewNopHost()))
	return r
}

func (r *rig) exited() (codes, syncsAtExit []int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.exits...), append([]int(nil), r.syncsAtExit...)
}

// heldByAComponent stands for a component's Shutdown that does not return:
// the goroutine summary must name it.
func heldByAComponent(release <-chan struct{}, parked chan<- struct{}) {
	close(parked)
	<-release
}

// The deadline passes before Shutdown: one error record naming the
// deadline, with the goroutines still running (the one held in
// heldByAComponent among them), flushed, then the exit with 124.
func TestExitsAfterTheDeadline(t *testing.T) {
	r := newRig(t, &Config{Deadline: 25 * time.Second})
	release, parked := make(chan struct{}), make(chan struct{})
	go heldByAComponent(release, parked)
	defer close(release)
	<-parked

	require.NoError(t, r.ext.Ready())
	armed, _ := r.timer.state()
	assert.Empty(t, armed, "armed before the shutdown began")
	require.NoError(t, r.ext.NotReady())
	require.NoError(t, r.ext.NotReady()) // once is enough; a second call does not re-arm
	armed, _ = r.timer.state()
	assert.Equal(t, []time.Duration{25 * time.Second}, armed)
	armedLogs := r.logs.FilterMessage(armedMessage).All()
	require.Len(t, armedLogs, 1, "the start of the deadline is logged")
	assert.Equal(t, "25s", armedLogs[0].ContextMap()["deadline"])

	codes, _ := r.exited()
	require.Empty(t, codes, "exited before the deadline")
	r.timer.expire(t)

	codes, syncsAtExit := r.exited()
	assert.Equal(t, []int{ExitCode}, codes)
	assert.Equal(t, []int{1}, syncsAtExit, "the logger is flushed once, before the exit")
	errs := r.logs.FilterLevelExact(zap.ErrorLevel).All()
	require.Len(t, errs, 1)
	rec := errs[0]
	assert.Equal(t, deadlineMessage, rec.Message)
	fields := rec.ContextMap()
	assert.Equal(t, "25s", fields["deadline"])
	assert.Equal(t, int64(ExitCode), fields["exit_code"])
	elapsed, _ := fields["elapsed"].(string)
	_, err := time.ParseDuration(elapsed)
	assert.NoError(t, err, "elapsed %q", elapsed)
	summary, _ := fields["goroutines"].(string)
	assert.True(t, strings.HasPrefix(summary, "goroutine profile: total "), "summary: %.200s", summary)
	assert.Contains(t, summary, "shutdowndeadlineextension.heldByAComponent", "the summary names the function the held goroutine waits in")
	assert.LessOrEqual(t, len(summary), maxSummaryBytes+100)

	// The collector's own Shutdown, should it still come: nothing more.
	require.NoError(t, r.ext.Shutdown(context.Background()))
	codes, _ = r.exited()
	assert.Len(t, codes, 1)
}

// Shutdown disarms: the timer is stopped, and a timer that fired as it was
// stopped does nothing.
func TestShutdownDisarms(t *testing.T) {
	r := newRig(t, &Config{Deadline: 40 * time.Second})
	require.NoError(t, r.ext.NotReady())
	require.NoError(t, r.ext.Shutdown(context.Background()))
	armed, stopped := r.timer.state()
	assert.Equal(t, []time.Duration{40 * time.Second}, armed)
	assert.True(t, stopped, "Shutdown stops the timer")

	r.timer.expire(t)
	codes, _ := r.exited()
	assert.Empty(t, codes, "exited after a finished shutdown")
	assert.Zero(t, r.logs.FilterLevelExact(zap.ErrorLevel).Len())
}

// A collector that never got to its shutdown's start (Shutdown alone, as
// after a failed start) arms nothing, and a NotReady after Shutdown does
// not either.
func TestShutdownWithoutNotReady(t *testing.T) {
	r := newRig(t, createDefaultConfig())
	require.NoError(t, r.ext.Shutdown(context.Background()))
	require.NoError(t, r.ext.NotReady())
	armed, _ := r.timer.state()
	assert.Empty(t, armed)
	codes, _ := r.exited()
	assert.Empty(t, codes)
}

func TestFactory(t *testing.T) {
	f := NewFactory()
	assert.Equal(t, metadata.Type, f.Type())
	ext, err := f.Create(context.Background(), extensiontest.NewNopSettings(metadata.Type), f.CreateDefaultConfig())
	require.NoError(t, err)
	d, ok := ext.(*deadline)
	require.True(t, ok)
	assert.Equal(t, defaultDeadline, d.deadline)
	assert.NotNil(t, d.exit)
	assert.NotNil(t, d.timer)
	// Shut down without a shutdown's start: nothing armed, nothing left.
	require.NoError(t, ext.Shutdown(context.Background()))

	_, err = f.Create(context.Background(), extensiontest.NewNopSettings(metadata.Type), &struct{ component.Config }{})
	assert.ErrorIs(t, err, errConfigNotDeadline)
	var _ extension.Factory = f
}

// The summary is the whole profile when it fits, else its first whole
// lines within the limit and a note of what was left out.
func TestGoroutineSummary(t *testing.T) {
	whole := goroutineSummary(1 << 24)
	assert.True(t, strings.HasPrefix(whole, "goroutine profile: total "))
	assert.NotContains(t, whole, "clipped")

	clipped := goroutineSummary(300)
	kept, note, ok := strings.Cut(clipped, "... clipped at 300 bytes, ")
	require.True(t, ok, "no clip note: %q", clipped)
	assert.LessOrEqual(t, len(kept), 300)
	assert.True(t, strings.HasSuffix(kept, "\n"), "clipped inside a line: %q", kept)
	assert.True(t, strings.HasPrefix(kept, "goroutine profile: total "))
	assert.Regexp(t, `^[1-9][0-9]* more left out$`, note)
}

func TestClippedWriter(t *testing.T) {
	w := &clippedWriter{limit: 15}
	for range 3 {
		n, err := w.Write([]byte("0123456789"))
		require.NoError(t, err)
		assert.Equal(t, 10, n, "a clipped write still reports all of it written, so the profile is not cut short with an error")
	}
	assert.Equal(t, "012345678901234", w.buf.String())
	assert.Equal(t, 15, w.dropped)
}
