package inspector // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/inspector"

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"os"
	"slices"
	"sync"

	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/safefile"
)

// Defaults for Options.
const (
	DefaultMaxLineBytes     = 1 << 20
	DefaultFingerprintBytes = 1024
	minReadBufferBytes      = 64 << 10
	maxMaxLineBytes         = 64 << 20
)

// Options tunes a Tailer; zero values take the defaults.
type Options struct {
	// MaxLineBytes caps a line (at most 64 MiB). Longer lines are skipped
	// (logged once per file); verbose lines with many channels are a few KiB.
	MaxLineBytes int
	// FingerprintBytes is how much of a file's beginning identifies it, so a
	// file replaced under the same name (and possibly the same inode) is
	// read again from the start instead of from a stale offset. The first
	// line carries a microsecond timestamp, which makes it unique per run.
	// At most 64 KiB.
	FingerprintBytes int
	// Refused, when set, is called with a followed name that is a symlink
	// or not a regular file (a FIFO swapped in, a device), once until the
	// name is gone or a regular file again. Such a name is never read: it
	// is opened only with safefile.Open, which neither follows symlinks nor
	// blocks. It is called during Poll and must not call the Tailer.
	Refused func(path string, err error)
}

// Stats counts what a Tailer has done since it was made.
type Stats struct {
	Records      int64 // collective, p2p and dump_stats lines emitted
	Other        int64 // well-formed lines of other kinds, skipped
	Malformed    int64 // lines that did not parse, skipped
	Overlong     int64 // lines over MaxLineBytes, skipped
	Truncations  int64 // files that shrank below the offset: read again from 0
	Replacements int64 // files replaced under the same name: read from 0
	Refused      int64 // names found to be symlinks or not regular files
}

// Tailer follows inspector files as they grow. It keeps each file open
// between polls, so a file that is renamed away or deleted is still read to
// its end before it is forgotten.
//
// Per file it remembers the offset of the first unread byte, the file's
// identity (inode, fingerprint of its beginning) and the last header and
// metadata seen. Only complete lines are read: a partial last line waits for
// its newline. Rules, checked at every Poll:
//   - size below the offset (truncation): read again from 0, logged;
//   - the name now points to another file (rotation, or delete and
//     re-create): finish the old file's complete lines, then read the new
//     one from 0;
//   - the name no longer exists: finish the open file, then forget it;
//   - the beginning no longer matches the fingerprint (rewritten in place,
//     or replaced while the collector was down): read from 0.
//
// Delivery is at least once: offsets advance after emit returns nil, and a
// restart resumes from the last State() the caller saved.
//
// A Tailer is safe for concurrent use; Poll holds it for its whole run, so
// emit must not call the Tailer.
type Tailer struct {
	logger *zap.Logger
	opts   Options

	mu    sync.Mutex
	files map[string]*tailedFile
	buf   []byte
	stats Stats
}

// tailedFile is one followed path.
type tailedFile struct {
	path  string
	f     *os.File // open between polls; nil until the next Poll opens it
	state FileState
	// context is the last header and metadata seen, for lines that lack
	// them (the dump_stats layout).
	context Record
	// lastSize is the size at the end of the last complete read; -1 forces
	// a read. It saves work when a file has not changed.
	lastSize int64

	warnedMalformed, warnedOverlong, warnedIO bool
	// refused: the name was a symlink or not a regular file at the last
	// Poll (reported once).
	refused bool
}

// NewTailer makes a Tailer that logs through logger.
func NewTailer(logger *zap.Logger, opts Options) *Tailer {
	if opts.MaxLineBytes <= 0 {
		opts.MaxLineBytes = DefaultMaxLineBytes
	}
	opts.MaxLineBytes = min(opts.MaxLineBytes, maxMaxLineBytes) // the read buffer is this big
	if opts.FingerprintBytes <= 0 {
		opts.FingerprintBytes = DefaultFingerprintBytes
	}
	opts.FingerprintBytes = min(opts.FingerprintBytes, minReadBufferBytes) // hashed in the read buffer
	return &Tailer{logger: logger, opts: opts, files: map[string]*tailedFile{}}
}

// Track starts following paths; a path already followed keeps its offset.
// New files are read from their beginning (the plugin creates one file per
// process, so everything in it is new to us).
func (t *Tailer) Track(paths ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range paths {
		if _, ok := t.files[p]; !ok {
			t.files[p] = &tailedFile{path: p, lastSize: -1}
		}
	}
}

// Stats returns the counters so far.
func (t *Tailer) Stats() Stats {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stats
}

// Close closes the open files. The offsets stay: a later Poll reopens the
// files and checks that they are still the same.
func (t *Tailer) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	var errs []error
	for _, tf := range t.files {
		errs = append(errs, tf.close())
	}
	return errors.Join(errs...)
}

// Emit receives the records read from one file, in file order: collective,
// p2p and dump_stats records, with header and metadata inherited where the
// line had none. The slice is the callee's to keep. A non-nil error leaves
// the file's offset before these records, so the next Poll reads them again.
type Emit func(path string, records []Record) error

// Poll reads the complete lines added to every followed file since the last
// Poll and passes their records to emit, in batches of at most one read
// buffer per call. Malformed and over-long lines are logged (once per file
// at Warn, then at Debug) and skipped. It returns the errors of files it
// could not read and of emit, each naming the file; the other files are
// read all the same. It stops early when ctx is done.
func (t *Tailer) Poll(ctx context.Context, emit Emit) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if need := max(t.opts.MaxLineBytes+1, minReadBufferBytes); len(t.buf) < need {
		t.buf = make([]byte, need)
	}
	var errs []error
	for _, p := range t.sortedPaths() {
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		if err := t.pollFile(ctx, t.files[p], emit); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (t *Tailer) sortedPaths() []string {
	paths := make([]string, 0, len(t.files))
	for p := range t.files {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	return paths
}

func (t *Tailer) pollFile(ctx context.Context, tf *tailedFile, emit Emit) error {
	pathInfo, err := os.Lstat(tf.path) // the name itself: a symlink is not followed
	if errors.Is(err, fs.ErrNotExist) {
		t.finish(ctx, tf, emit, "file removed")
		return nil
	}
	if err != nil {
		return t.ioError(tf, "stat", err)
	}

	var errs []error
	if refusal := safefile.Check(tf.path, pathInfo.Mode()); refusal != nil {
		if tf.f != nil {
			// The followed file was replaced by something we do not read:
			// finish the old file's complete lines.
			if err := t.read(ctx, tf, emit, true); err != nil {
				errs = append(errs, err)
			}
			tf.close()
			tf.restart()
		}
		t.refuse(tf, refusal)
		return errors.Join(errs...)
	}
	if tf.f != nil {
		fdInfo, err := tf.f.Stat()
		if err != nil || !os.SameFile(pathInfo, fdInfo) {
			// Rotation: the name is another file now. Finish the old one.
			if err := t.read(ctx, tf, emit, true); err != nil {
				errs = append(errs, err)
			}
			t.logger.Info("ncclflightreceiver: inspector file replaced under its name; reading the new file from the start",
				zap.String("path", tf.path), zap.Int64("old_offset", tf.state.Offset))
			t.stats.Replacements++
			tf.close()
			tf.restart()
		}
	}
	if tf.f == nil {
		f, _, err := safefile.Open(tf.path) // decided on the descriptor: swapped in since Lstat is refused too
		if errors.Is(err, fs.ErrNotExist) {
			t.forget(tf, "file removed")
			return errors.Join(errs...)
		}
		if safefile.Reason(err) != "" {
			tf.restart()
			t.refuse(tf, err)
			return errors.Join(errs...)
		}
		if err != nil {
			return errors.Join(append(errs, t.ioError(tf, "open", err))...)
		}
		tf.f, tf.lastSize = f, -1
		tf.refused = false
	}
	fdInfo, err := tf.f.Stat()
	if err != nil {
		return errors.Join(append(errs, t.ioError(tf, "stat", err))...)
	}
	// The state may come from Restore or predate a re-open: check that it
	// describes this file.
	if ino := inodeOf(fdInfo); tf.state.Inode != 0 && ino != 0 && tf.state.Inode != ino {
		t.logger.Info("ncclflightreceiver: inspector file is not the one the saved offset was for; reading from the start",
			zap.String("path", tf.path), zap.Uint64("saved_inode", tf.state.Inode), zap.Uint64("inode", ino))
		t.stats.Replacements++
		tf.restart()
	}
	tf.state.Inode = inodeOf(fdInfo)

	size := fdInfo.Size()
	if size < tf.state.Offset {
		t.logger.Info("ncclflightreceiver: inspector file truncated; reading from the start",
			zap.String("path", tf.path), zap.Int64("size", size), zap.Int64("offset", tf.state.Offset))
		t.stats.Truncations++
		tf.restart()
	}
	if size == tf.lastSize {
		return errors.Join(errs...) // unchanged since the last complete read
	}
	if err := t.checkFingerprint(tf, size); err != nil {
		return errors.Join(append(errs, err)...)
	}

	tf.lastSize = -1
	if err := t.read(ctx, tf, emit, false); err != nil {
		return errors.Join(append(errs, err)...)
	}
	tf.lastSize = size
	tf.warnedIO = false
	return errors.Join(errs...)
}

// checkFingerprint restarts the file when its beginning differs from what
// was read before, then extends the fingerprint while the file is shorter
// than FingerprintBytes.
func (t *Tailer) checkFingerprint(tf *tailedFile, size int64) error {
	if n := tf.state.FingerprintLen; n > 0 {
		sum, err := t.hashPrefix(tf, n)
		if err != nil {
			return err
		}
		if sum != tf.state.Fingerprint {
			t.logger.Info("ncclflightreceiver: inspector file rewritten since it was read; reading from the start",
				zap.String("path", tf.path), zap.Int64("offset", tf.state.Offset))
			t.stats.Replacements++
			tf.restart()
		}
	}
	if n := int(min(size, int64(t.opts.FingerprintBytes))); n > tf.state.FingerprintLen {
		sum, err := t.hashPrefix(tf, n)
		if err != nil {
			return err
		}
		tf.state.Fingerprint, tf.state.FingerprintLen = sum, n
	}
	return nil
}

// hashPrefix hashes the first n bytes; a file now shorter than n hashes to
// a value no full prefix has (0 is never stored for n > 0 in practice).
func (t *Tailer) hashPrefix(tf *tailedFile, n int) (uint64, error) {
	b := t.buf[:n]
	got, err := tf.f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, t.ioError(tf, "read", err)
	}
	if got < n {
		return 0, nil
	}
	h := fnv.New64a()
	_, _ = h.Write(b)
	return h.Sum64(), nil
}

// finish reads what is left of a file whose name disappeared, then forgets it.
func (t *Tailer) finish(ctx context.Context, tf *tailedFile, emit Emit, why string) {
	if tf.f != nil {
		if err := t.read(ctx, tf, emit, true); err != nil {
			t.logger.Warn("ncclflightreceiver: inspector file removed before it was read to the end",
				zap.String("path", tf.path), zap.Error(err))
		}
	}
	t.forget(tf, why)
}

// refuse reports a name that is a symlink or not a regular file, once
// until it is a regular file again.
func (t *Tailer) refuse(tf *tailedFile, err error) {
	if tf.refused {
		return
	}
	tf.refused = true
	t.stats.Refused++
	t.logger.Debug("ncclflightreceiver: refusing inspector file", zap.String("path", tf.path), zap.Error(err))
	if t.opts.Refused != nil {
		t.opts.Refused(tf.path, err)
	}
}

func (t *Tailer) forget(tf *tailedFile, why string) {
	t.logger.Debug("ncclflightreceiver: forgetting inspector file", zap.String("path", tf.path), zap.String("reason", why))
	tf.close()
	delete(t.files, tf.path)
}

func (t *Tailer) ioError(tf *tailedFile, op string, err error) error {
	err = fmt.Errorf("ncclflightreceiver: %s: %s inspector file: %w", tf.path, op, err)
	if !tf.warnedIO {
		tf.warnedIO = true
		t.logger.Warn("ncclflightreceiver: cannot read inspector file; will retry", zap.Error(err))
	}
	return err
}

// read parses the complete lines from the offset to the end of the open
// file and emits them, one read buffer at a time. draining says the writer
// is gone (the file was rotated or removed): a partial last line is dropped.
func (t *Tailer) read(ctx context.Context, tf *tailedFile, emit Emit, draining bool) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := tf.f.ReadAt(t.buf, tf.state.Offset)
		if err != nil && !errors.Is(err, io.EOF) {
			return t.ioError(tf, "read", err)
		}
		if n == 0 {
			return nil
		}
		chunk := t.buf[:n]
		consumed, skip := 0, tf.state.SkipToNewline
		if skip {
			// The rest of an over-long line: drop through its newline.
			i := bytes.IndexByte(chunk, '\n')
			if i < 0 {
				consumed = n
			} else {
				consumed, skip = i+1, false
			}
		}
		ctxAfter := tf.context
		var records []Record
		var other, malformed, overlong int64
		for !skip {
			i := bytes.IndexByte(chunk[consumed:], '\n')
			if i < 0 {
				break
			}
			line, lineOffset := chunk[consumed:consumed+i], tf.state.Offset+int64(consumed)
			consumed += i + 1
			if len(line) > t.opts.MaxLineBytes {
				overlong++
				t.warnOverlong(tf, lineOffset, len(line))
				continue
			}
			if len(bytes.TrimSpace(line)) == 0 {
				continue
			}
			rec, err := ParseLine(line)
			if err != nil {
				malformed++
				t.warnMalformed(tf, lineOffset, err)
				continue
			}
			if rec.HasHeader {
				ctxAfter.Header, ctxAfter.HasHeader = rec.Header, true
			}
			if rec.HasMetadata {
				ctxAfter.Metadata, ctxAfter.HasMetadata = rec.Metadata, true
			}
			if rec.Kind == KindOther {
				other++
				continue
			}
			rec.Inherit(&ctxAfter)
			records = append(records, rec)
		}
		if !skip && consumed < n && n-consumed > t.opts.MaxLineBytes {
			// No newline within MaxLineBytes: skip the line as it comes.
			overlong++
			t.warnOverlong(tf, tf.state.Offset+int64(consumed), n-consumed)
			consumed, skip = n, true
		}
		if consumed == 0 {
			if draining {
				t.logger.Debug("ncclflightreceiver: dropping the partial last line of a finished inspector file",
					zap.String("path", tf.path), zap.Int("bytes", n))
			}
			return nil // a partial line waits for its newline
		}
		if len(records) > 0 {
			if err := emit(tf.path, records); err != nil {
				return fmt.Errorf("ncclflightreceiver: %s: emitting inspector records at offset %d: %w", tf.path, tf.state.Offset, err)
			}
		}
		tf.state.Offset += int64(consumed)
		tf.state.SkipToNewline = skip
		tf.context = ctxAfter
		t.stats.Records += int64(len(records))
		t.stats.Other += other
		t.stats.Malformed += malformed
		t.stats.Overlong += overlong
	}
}

func (t *Tailer) warnMalformed(tf *tailedFile, offset int64, err error) {
	fields := []zap.Field{zap.String("path", tf.path), zap.Int64("offset", offset), zap.Error(err)}
	if tf.warnedMalformed {
		t.logger.Debug("ncclflightreceiver: skipping malformed inspector line", fields...)
		return
	}
	tf.warnedMalformed = true
	t.logger.Warn("ncclflightreceiver: skipping malformed inspector line (further ones in this file are logged at debug level)", fields...)
}

func (t *Tailer) warnOverlong(tf *tailedFile, offset int64, length int) {
	fields := []zap.Field{zap.String("path", tf.path), zap.Int64("offset", offset), zap.Int("max_line_bytes", t.opts.MaxLineBytes)}
	if tf.warnedOverlong {
		t.logger.Debug("ncclflightreceiver: skipping over-long inspector line", fields...)
		return
	}
	tf.warnedOverlong = true
	t.logger.Warn("ncclflightreceiver: skipping over-long inspector line (further ones in this file are logged at debug level)",
		append(fields, zap.Int("length_at_least", length))...)
}

// restart makes the file be read from its beginning.
func (tf *tailedFile) restart() {
	tf.state = FileState{}
	tf.context = Record{}
	tf.lastSize = -1
}

func (tf *tailedFile) close() error {
	if tf.f == nil {
		return nil
	}
	err := tf.f.Close()
	tf.f = nil
	return err
}
