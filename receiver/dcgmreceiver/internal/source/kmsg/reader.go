// Package kmsg reads NVIDIA XIDs from the kernel log (/dev/kmsg). The driver
// logs every XID there, e.g.
//
//	NVRM: Xid (PCI:0000:9b:00): 79, pid=..., name=..., GPU has fallen off the bus.
//
// which makes it the most reliable record of an XID 79: a GPU that fell off
// the bus can no longer answer DCGM or NVML. Events name the GPU by PCI bus
// id only; the receiver resolves it to the full GPU.
package kmsg // import "github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/source/kmsg"

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/source"
)

// SourceName is the XIDEvent.Source of every event from this package.
const SourceName = "kmsg"

// Defaults for Options.
const (
	DefaultPath         = "/dev/kmsg"
	DefaultProcStatPath = "/proc/stat"
)

const (
	// readBufSize holds one /dev/kmsg record: each read(2) returns exactly
	// one, and fails with EINVAL when the buffer is too small for it, in
	// which case the buffer doubles up to maxReadBufSize.
	readBufSize    = 8 << 10
	maxReadBufSize = 1 << 20
	// maxLineSize bounds a line of a stream (a file or pipe) that never ends.
	maxLineSize = 1 << 20
	// maxEmptyReads stops a reader that returns no bytes and no error.
	maxEmptyReads = 100
)

// Options configure a Reader. The zero value reads /dev/kmsg from its end.
type Options struct {
	// Path of the kernel log: /dev/kmsg, or in tests a file or fifo holding
	// records in the same format.
	Path string
	// ProcStatPath is where boot time (the btime line) is read, to turn the
	// records' microseconds since boot into wall time.
	ProcStatPath string
	// FromStart reports the records already in the log. By default the
	// Reader seeks to the end first, so a restart does not replay the XIDs
	// of the whole boot.
	FromStart bool
}

// Stats counts what a Reader has seen, for the receiver's own telemetry.
type Stats struct {
	Records     uint64 // kernel log records read
	XIDs        uint64 // XID events given to the sink
	Malformed   uint64 // records or XID lines that could not be parsed, skipped
	Overwritten uint64 // times the kernel overwrote records before they were read
}

// Reader delivers the XIDs of the kernel log. It implements source.XIDs.
type Reader struct {
	logger *zap.Logger
	opts   Options

	// Seams for tests: how the log is opened, what the clock says, and how
	// boot time is found.
	open     func(path string) (io.ReadCloser, error)
	now      func() time.Time
	bootTime func() (time.Time, error)

	records, xids, malformed, overwritten atomic.Uint64
}

var _ source.XIDs = (*Reader)(nil)

// New returns a Reader of opts.Path (default /dev/kmsg) that logs through
// logger. Nothing is opened until Run.
func New(logger *zap.Logger, opts Options) *Reader {
	if opts.Path == "" {
		opts.Path = DefaultPath
	}
	if opts.ProcStatPath == "" {
		opts.ProcStatPath = DefaultProcStatPath
	}
	r := &Reader{
		logger: logger,
		opts:   opts,
		open:   func(path string) (io.ReadCloser, error) { return os.Open(path) },
		now:    time.Now,
	}
	r.bootTime = func() (time.Time, error) { return readBootTime(r.opts.ProcStatPath) }
	return r
}

// Stats returns the counts so far. Safe to call while Run runs.
func (r *Reader) Stats() Stats {
	return Stats{
		Records:     r.records.Load(),
		XIDs:        r.xids.Load(),
		Malformed:   r.malformed.Load(),
		Overwritten: r.overwritten.Load(),
	}
}

// runState is what one Run has already said, so that each condition is
// logged once.
type runState struct {
	boot              time.Time // zero when unknown
	sink              source.XIDSink
	loggedMalformed   bool
	loggedOverwritten bool
	loggedLongLine    bool
}

// Run reads the log and gives every XID to sink, from the calling goroutine,
// until ctx is cancelled (it returns nil then). It also returns nil, after
// one warning, when the process may not read the log (EACCES/EPERM: an
// unprivileged container), and when a file or pipe ends. Any other failure
// to open or read is returned as an error. Malformed records are counted,
// logged once and skipped.
func (r *Reader) Run(ctx context.Context, sink source.XIDSink) error {
	if ctx.Err() != nil {
		return nil
	}
	path := r.opts.Path
	f, err := r.open(path)
	if err != nil {
		if errors.Is(err, fs.ErrPermission) {
			r.warnNoPrivileges(err)
			return nil
		}
		return fmt.Errorf("dcgmreceiver: kmsg: opening %s: %w", path, err)
	}
	// A read of /dev/kmsg blocks until the kernel logs something: closing
	// the file on cancellation is what unblocks it.
	var closeOnce sync.Once
	closeFile := func() { closeOnce.Do(func() { _ = f.Close() }) }
	stop := context.AfterFunc(ctx, closeFile)
	defer func() {
		stop()
		closeFile()
	}()

	if !r.opts.FromStart {
		r.seekToEnd(f)
	}
	st := &runState{sink: sink}
	if st.boot, err = r.bootTime(); err != nil {
		r.logger.Warn("Boot time unknown: kernel log XIDs are timed when they are read, not when the kernel logged them",
			zap.String("proc_stat", r.opts.ProcStatPath), zap.Error(err))
	}
	r.logger.Info("Reading XIDs from the kernel log", zap.String("path", path), zap.Bool("from_start", r.opts.FromStart))

	buf := make([]byte, readBufSize)
	var pending []byte // a line not yet ended by '\n' (files and pipes only)
	emptyReads := 0
	for {
		n, err := f.Read(buf)
		if n > 0 {
			emptyReads = 0
			data := buf[:n]
			if len(pending) > 0 {
				data = append(pending, data...)
			}
			pending = r.consumeLines(st, data)
		}
		if err == nil {
			if n == 0 {
				if emptyReads++; emptyReads >= maxEmptyReads {
					return fmt.Errorf("dcgmreceiver: kmsg: reading %s: %w", path, io.ErrNoProgress)
				}
			}
			continue
		}
		if ctx.Err() != nil {
			return nil
		}
		switch {
		case errors.Is(err, io.EOF):
			if len(pending) > 0 {
				r.consumeLine(st, pending)
			}
			r.logger.Info("Kernel log ended", zap.String("path", path))
			return nil
		case errors.Is(err, syscall.EPIPE):
			// The kernel's ring buffer wrapped past records not yet read;
			// the next read continues with the oldest record still there.
			r.overwritten.Add(1)
			if !st.loggedOverwritten {
				st.loggedOverwritten = true
				r.logger.Warn("Kernel log records were overwritten before they were read; XIDs among them are lost (further occurrences are only counted)",
					zap.String("path", path))
			}
		case errors.Is(err, syscall.EINVAL) && len(buf) < maxReadBufSize:
			buf = make([]byte, 2*len(buf)) // a record longer than the buffer
		case errors.Is(err, fs.ErrPermission):
			r.warnNoPrivileges(err)
			return nil
		default:
			return fmt.Errorf("dcgmreceiver: kmsg: reading %s: %w", path, err)
		}
	}
}

func (r *Reader) warnNoPrivileges(err error) {
	r.logger.Warn("No privileges to read the kernel log: XIDs come only from the other sources (run privileged or with CAP_SYSLOG to read it)",
		zap.String("path", r.opts.Path), zap.Error(err))
}

// seekToEnd skips the records already in the log. A pipe cannot seek and
// has no past to skip (ESPIPE); any other failure means old records will be
// reported, which is worth a warning but not worth stopping for.
func (r *Reader) seekToEnd(f io.ReadCloser) {
	s, ok := f.(io.Seeker)
	if !ok {
		return
	}
	if _, err := s.Seek(0, io.SeekEnd); err != nil && !errors.Is(err, syscall.ESPIPE) {
		r.logger.Warn("Cannot skip to the end of the kernel log: XIDs already in it will be reported again",
			zap.String("path", r.opts.Path), zap.Error(err))
	}
}

// consumeLines handles every complete line of data and returns the rest.
// /dev/kmsg hands over one whole record per read, so the rest is empty
// there; a file or pipe can split a line across reads.
func (r *Reader) consumeLines(st *runState, data []byte) []byte {
	for {
		line, rest, found := bytes.Cut(data, []byte{'\n'})
		if !found {
			break
		}
		r.consumeLine(st, line)
		data = rest
	}
	if len(data) > maxLineSize {
		r.malformed.Add(1)
		if !st.loggedLongLine {
			st.loggedLongLine = true
			r.logger.Warn("Kernel log line too long, dropped", zap.String("path", r.opts.Path), zap.Int("bytes", len(data)))
		}
		return nil
	}
	// Keep the partial line in a fresh slice so the read buffer's array is
	// not pinned by it.
	return append([]byte(nil), data...)
}

// consumeLine handles one record header line; dictionary lines (starting
// with a space) carry nothing an XID needs.
func (r *Reader) consumeLine(st *runState, line []byte) {
	if len(line) == 0 || line[0] == ' ' {
		return
	}
	r.records.Add(1)
	rec, err := ParseRecord(line)
	if err != nil {
		r.logMalformed(st, err)
		return
	}
	ev, ok, err := ParseXIDLine(rec.Message)
	if err != nil {
		r.logMalformed(st, fmt.Errorf("record %d: %w", rec.Seq, err))
		return
	}
	if !ok {
		return
	}
	var at time.Time
	if st.boot.IsZero() {
		at = r.now() // close enough: the Reader starts at the end and keeps up
	} else {
		at = st.boot.Add(rec.SinceBoot)
	}
	r.xids.Add(1)
	st.sink(model.XIDEvent{
		Time:        at,
		GPU:         model.GPU{PCIBusID: ev.PCIBusID},
		Code:        ev.Code,
		Message:     ev.Message,
		PID:         ev.PID,
		ProcessName: ev.ProcessName,
		Source:      SourceName,
	})
}

func (r *Reader) logMalformed(st *runState, err error) {
	r.malformed.Add(1)
	if st.loggedMalformed {
		r.logger.Debug("Skipping malformed kernel log record", zap.Error(err))
		return
	}
	st.loggedMalformed = true
	r.logger.Warn("Skipping malformed kernel log record (further ones are logged at debug level)",
		zap.String("path", r.opts.Path), zap.Error(err))
}
