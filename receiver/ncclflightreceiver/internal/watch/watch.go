// Package watch finds files that are complete: dumps that appear in watched
// directories (fsnotify, plus a periodic rescan for what notifications miss:
// network filesystems, a directory created later, a full event queue). A
// file is complete once its size and modification time stay the same for a
// settle time, which also covers files renamed into place.
package watch // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/watch"

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/safefile"
)

// Options of a Watcher.
type Options struct {
	Dirs     []string
	Patterns []string // shell patterns of base names, e.g. nccl_trace_rank_*
	// Rescan is the interval of full directory listings.
	Rescan time.Duration
	// Settle is how long size and mtime must stay unchanged.
	Settle time.Duration
	// Refused, when set, is called (from Run's goroutine) with a matching
	// name that is not a regular file (a symlink, FIFO, device, socket or
	// directory), once until the name is gone or a regular file again. The
	// error wraps safefile.ErrSymlink or safefile.ErrNotRegular.
	Refused func(path string, err error)
	// Depth is how many levels of subdirectories below each of Dirs are
	// followed too (0: none): the per-job, per-attempt directories dumps
	// are written to. Symlinked directories are not followed.
	Depth int
}

// maxSubdirs bounds the subdirectories followed below one of Dirs: the
// names are made by whoever can write there, and each costs a listing on
// every rescan and a notification watch.
const maxSubdirs = 4096

// File is a complete file.
type File struct {
	Path    string
	Size    int64
	ModTime time.Time
	Inode   uint64
}

// Key identifies one version of a file: the same path rewritten is a new key.
func (f File) Key() string {
	return f.Path + "|" + itoa(f.Inode) + "|" + itoa(uint64(f.Size)) + "|" + itoa(uint64(f.ModTime.UnixNano()))
}

func itoa(v uint64) string {
	if v == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for v > 0 {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
	}
	return string(b[i:])
}

type observation struct {
	size     int64
	modTime  time.Time
	inode    uint64
	since    time.Time // when this size/mtime was first seen
	reported bool
}

// Watcher reports complete files.
type Watcher struct {
	opts   Options
	logger *zap.Logger
	now    func() time.Time

	seen       map[string]*observation
	refused    map[string]bool // matching names reported to Options.Refused
	dirMissing map[string]bool
	tooMany    map[string]bool // Dirs with more than maxSubdirs subdirectories, reported
}

// New returns a Watcher. Zero durations take 10 s (Rescan) and 1 s (Settle).
func New(opts Options, logger *zap.Logger) *Watcher {
	if opts.Rescan <= 0 {
		opts.Rescan = 10 * time.Second
	}
	if opts.Settle <= 0 {
		opts.Settle = time.Second
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	return &Watcher{opts: opts, logger: logger, now: time.Now, seen: map[string]*observation{}, refused: map[string]bool{}, dirMissing: map[string]bool{},
		tooMany: map[string]bool{}}
}

// Run watches until ctx ends, calling ready (from this goroutine) with the
// files that became complete or changed since they were last reported. Files
// that settle together (the ranks of a job dumping on the same timeout) come
// in one call, in path order, so that the caller can analyze them together
// and save its progress once.
func (w *Watcher) Run(ctx context.Context, ready func([]File)) error {
	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		w.logger.Warn("ncclflightreceiver: no file notifications, relying on rescans", zap.Error(err))
		fsw = nil
	}
	var events <-chan fsnotify.Event
	var errs <-chan error
	if fsw != nil {
		defer fsw.Close()
		events, errs = fsw.Events, fsw.Errors
	}
	watched := map[string]bool{}
	w.rescan(fsw, watched)
	rescan := time.NewTicker(w.opts.Rescan)
	defer rescan.Stop()
	settle := time.NewTicker(w.opts.Settle / 2)
	defer settle.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
				if watched[ev.Name] { // a watched directory went away
					delete(watched, ev.Name)
				}
				delete(w.seen, ev.Name)
				delete(w.refused, ev.Name)
				continue
			}
			if w.matches(ev.Name) {
				w.observe(ev.Name)
			}
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			// Typically a full event queue: the next rescan catches up.
			w.logger.Debug("ncclflightreceiver: file notification error", zap.Error(err))
		case <-rescan.C:
			w.rescan(fsw, watched)
		case <-settle.C:
			w.settled(ready)
		}
	}
}

func (w *Watcher) matches(path string) bool {
	base := filepath.Base(path)
	for _, p := range w.opts.Patterns {
		if ok, _ := filepath.Match(p, base); ok {
			return true
		}
	}
	return false
}

// rescan lists every directory, (re)adds notifications for directories that
// exist now, and observes matching files.
func (w *Watcher) rescan(fsw *fsnotify.Watcher, watched map[string]bool) {
	present := map[string]bool{}
	for _, dir := range w.opts.Dirs {
		entries, err := os.ReadDir(dir)
		if err != nil {
			if !w.dirMissing[dir] {
				w.logger.Warn("ncclflightreceiver: cannot list directory, retrying on every rescan",
					zap.String("directory", dir), zap.Error(err))
				w.dirMissing[dir] = true
			}
			continue
		}
		if w.dirMissing[dir] {
			w.logger.Info("ncclflightreceiver: directory readable again", zap.String("directory", dir))
			delete(w.dirMissing, dir)
		}
		subdirs := 0
		w.list(fsw, watched, present, dir, entries, w.opts.Depth, &subdirs)
		if subdirs > maxSubdirs && !w.tooMany[dir] {
			w.logger.Warn(fmt.Sprintf("ncclflightreceiver: more than %d subdirectories below a dump directory; following the first %d only", maxSubdirs, maxSubdirs),
				zap.String("directory", dir))
			w.tooMany[dir] = true
		}
	}
	for path := range w.seen {
		if !present[path] {
			delete(w.seen, path)
		}
	}
	for path := range w.refused {
		if !present[path] {
			delete(w.refused, path)
		}
	}
}

// list watches dir, observes its matching files, and follows its
// subdirectories down to depth more levels, at most maxSubdirs of them
// (counted in subdirs) below one of Dirs.
func (w *Watcher) list(fsw *fsnotify.Watcher, watched, present map[string]bool, dir string, entries []os.DirEntry, depth int, subdirs *int) {
	if fsw != nil && !watched[dir] {
		if err := fsw.Add(dir); err == nil {
			watched[dir] = true
		}
	}
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		if e.IsDir() { // a symlink to a directory is not one (DirEntry does not follow it)
			if depth == 0 || strings.HasPrefix(e.Name(), ".") {
				continue // not followed (and not refused)
			}
			if *subdirs++; *subdirs > maxSubdirs {
				continue
			}
			sub, err := os.ReadDir(path)
			if err != nil {
				continue // gone, or not ours to read: the next rescan tries again
			}
			w.list(fsw, watched, present, path, sub, depth-1, subdirs)
			continue
		}
		if w.matches(path) {
			present[path] = true
			w.observe(path)
		}
	}
}

// observe records a file's current size and mtime; a change restarts its
// settle time. Symlinks are not followed: a name that is not a regular file
// is refused (reported once) and never read.
func (w *Watcher) observe(path string) {
	info, err := os.Lstat(path)
	if err != nil {
		delete(w.seen, path)
		return
	}
	if err := safefile.Check(path, info.Mode()); err != nil {
		delete(w.seen, path)
		if !w.refused[path] {
			w.refused[path] = true
			if w.opts.Refused != nil {
				w.opts.Refused(path, err)
			}
		}
		return
	}
	delete(w.refused, path)
	o := w.seen[path]
	ino := inode(info)
	if o != nil && o.size == info.Size() && o.modTime.Equal(info.ModTime()) && o.inode == ino {
		return
	}
	w.seen[path] = &observation{size: info.Size(), modTime: info.ModTime(), inode: ino, since: w.now()}
}

// settled reports files unchanged for the settle time, in path order.
func (w *Watcher) settled(ready func([]File)) {
	now := w.now()
	var due []string
	for path, o := range w.seen {
		if !o.reported && now.Sub(o.since) >= w.opts.Settle {
			due = append(due, path)
		}
	}
	sort.Strings(due)
	var files []File
	for _, path := range due {
		o := w.seen[path]
		w.observe(path) // one more look: still the same?
		if cur := w.seen[path]; cur == nil || cur != o {
			continue
		}
		o.reported = true
		files = append(files, File{Path: path, Size: o.size, ModTime: o.modTime, Inode: o.inode})
	}
	if len(files) > 0 {
		ready(files)
	}
}

func inode(info fs.FileInfo) uint64 {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}

// ErrTooLarge is returned by ReadFile for a file over the size cap.
var ErrTooLarge = errors.New("file is over the size cap")

// ReadFile reads a complete regular file, refusing one over maxSize bytes
// without reading it. It opens with safefile.Open: a symlink or a file that
// is not regular (swapped in since it was observed) is refused, decided on
// the open descriptor, and never blocks.
func ReadFile(path string, maxSize int64) ([]byte, error) {
	f, info, err := safefile.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if info.Size() > maxSize {
		return nil, ErrTooLarge
	}
	buf := make([]byte, info.Size())
	n, err := f.ReadAt(buf, 0)
	if err != nil && n != len(buf) {
		return nil, err
	}
	return buf[:n], nil
}
