package shutdowndeadlineextension // import "github.com/otelcol-gpu/otelcol-gpu/extension/shutdowndeadlineextension"

import (
	"bytes"
	"context"
	"fmt"
	"runtime/pprof"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"
	"go.opentelemetry.io/collector/extension/extensioncapabilities"
	"go.uber.org/zap"
)

// ExitCode is the process's exit status when the deadline passes: what
// timeout(1) exits with when its command ran out of time, so that a pod's
// last state or a unit's status tells it from a crash (1, 2) or a kill (137).
const ExitCode = 124

// maxSummaryBytes bounds the goroutine summary in the log record: the
// profile (debug=1) groups goroutines by stack, most numerous first, so
// the first 64 KiB name what most goroutines wait on.
const maxSummaryBytes = 64 << 10

// Messages of the extension's log records; the e2e test looks for
// deadlineMessage in the gateway's log.
const (
	armedMessage    = "Shutdown started: the process exits if it has not finished shutting down within the shutdown deadline"
	deadlineMessage = "Shutdown did not finish within the shutdown deadline: exiting; what in-memory queues and processors still held is lost (persistent queues stay on disk)"
)

// deadline is the extension: armed by NotReady, disarmed by Shutdown.
type deadline struct {
	component.StartFunc
	deadline time.Duration
	logger   *zap.Logger
	exit     func(code int)
	timer    afterFunc

	mu       sync.Mutex
	armedAt  time.Time
	stop     func() bool // the armed timer's; nil until NotReady
	finished bool        // Shutdown ran, or the deadline fired
}

var (
	_ extension.Extension                   = (*deadline)(nil)
	_ extensioncapabilities.PipelineWatcher = (*deadline)(nil)
)

func newExtension(set extension.Settings, cfg *Config, exit func(int), timer afterFunc) *deadline {
	return &deadline{deadline: cfg.Deadline, logger: set.Logger, exit: exit, timer: timer}
}

// Ready implements extensioncapabilities.PipelineWatcher: nothing to do
// when the pipelines start.
func (*deadline) Ready() error { return nil }

// NotReady implements extensioncapabilities.PipelineWatcher. The service
// calls it at the start of its shutdown, before it stops the receivers
// (service.Shutdown, go.opentelemetry.io/collector/service v0.165.0): the
// deadline runs from here.
func (d *deadline) NotReady() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.finished || d.stop != nil {
		return nil
	}
	d.armedAt = time.Now()
	d.stop = d.timer(d.deadline, d.fire)
	d.logger.Info(armedMessage, zap.Stringer("deadline", d.deadline))
	return nil
}

// Shutdown disarms the deadline: the service stops extensions after every
// pipeline, so what could hold the process has ended.
func (d *deadline) Shutdown(context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.finished = true
	if d.stop != nil {
		d.stop()
	}
	return nil
}

// fire ends the process: the deadline passed before Shutdown.
func (d *deadline) fire() {
	d.mu.Lock()
	if d.finished {
		// Shutdown came first: the timer raced its Stop.
		d.mu.Unlock()
		return
	}
	d.finished = true
	armedAt := d.armedAt
	d.mu.Unlock()

	// Durations as text ("25s"): the collector's encoder writes a
	// zap.Duration as a number of seconds.
	d.logger.Error(deadlineMessage,
		zap.Stringer("deadline", d.deadline),
		zap.Stringer("elapsed", time.Since(armedAt).Round(time.Millisecond)),
		zap.Int("exit_code", ExitCode),
		zap.String("goroutines", goroutineSummary(maxSummaryBytes)))
	_ = d.logger.Sync()
	d.exit(ExitCode)
}

// goroutineSummary is the goroutine profile in its debug=1 text (one entry
// per distinct stack, with its count, most numerous first), clipped to the
// last whole line within limit bytes, with a note of what was left out.
func goroutineSummary(limit int) string {
	w := &clippedWriter{limit: limit}
	if p := pprof.Lookup("goroutine"); p != nil {
		if err := p.WriteTo(w, 1); err != nil {
			return "goroutine profile: " + err.Error()
		}
	}
	if w.dropped == 0 {
		return w.buf.String()
	}
	b := w.buf.Bytes()
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		w.dropped += len(b) - i - 1
		b = b[:i+1]
	}
	return fmt.Sprintf("%s... clipped at %d bytes, %d more left out", b, limit, w.dropped)
}

// clippedWriter keeps the first limit bytes written to it and counts the
// rest.
type clippedWriter struct {
	limit   int
	buf     bytes.Buffer
	dropped int
}

func (w *clippedWriter) Write(p []byte) (int, error) {
	room := max(w.limit-w.buf.Len(), 0)
	if len(p) <= room {
		w.buf.Write(p)
		return len(p), nil
	}
	w.buf.Write(p[:room])
	w.dropped += len(p) - room
	return len(p), nil
}
