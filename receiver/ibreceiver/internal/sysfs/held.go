package sysfs // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ibreceiver/internal/sysfs"

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"sync/atomic"
)

// FileBudget bounds the file descriptors that the Readers sharing it hold
// open between reads. A file that would take the held count past the
// budget is read with open, read, close instead, and counted (Refused).
type FileBudget struct {
	max     int64
	held    atomic.Int64
	refused atomic.Int64
}

// NewFileBudget returns a budget of max descriptors; 0 holds none.
func NewFileBudget(max int) *FileBudget { return &FileBudget{max: int64(max)} }

// Max is the budget.
func (b *FileBudget) Max() int { return int(b.max) }

// Held is the number of descriptors held now.
func (b *FileBudget) Held() int { return int(b.held.Load()) }

// TakeRefused returns the reads done without holding their file since the
// last call (the budget was spent), and resets the count.
func (b *FileBudget) TakeRefused() int64 { return b.refused.Swap(0) }

func (b *FileBudget) take() bool {
	if b.held.Add(1) > b.max {
		b.held.Add(-1)
		b.refused.Add(1)
		return false
	}
	return true
}

func (b *FileBudget) give() { b.held.Add(-1) }

// heldFile is one file a Reader reads every scrape: its path, built once,
// and, when held, its open descriptor, read again from offset 0 (pread):
// one system call per read instead of open, read, read, close. Only
// regular files are held (a sysfs attribute is one); anything else is
// read with open, read, close every time, as before.
type heldFile struct {
	path string
	f    *os.File // nil when not held
	fd   uintptr
}

// release closes the held descriptor, if any.
func (r *Reader) release(h *heldFile) {
	if h.f == nil {
		return
	}
	_ = h.f.Close()
	h.f = nil
	r.budget.give()
}

func (r *Reader) releaseAll(hs []heldFile) {
	for i := range hs {
		r.release(&hs[i])
	}
}

// readHeld reads h into the reader's buffer: from its held descriptor, or
// by opening it (and holding it when it is a regular file and the budget
// allows). A read of a held descriptor that fails (the device went away:
// ENODEV, ESTALE, EIO) closes it and opens the file once more. Without a
// budget it is readFile. The result is valid until the next read; errors
// are *fs.PathError values.
func (r *Reader) readHeld(h *heldFile) ([]byte, error) {
	if r.budget == nil {
		return r.readFile(h.path)
	}
	r.setCurrent(h.path)
	if h.f != nil {
		b, err := r.pread(h)
		if err == nil || errors.Is(err, ErrTooLong) {
			return b, err
		}
		r.release(h) // stale: open it again, once
	}
	f, err := os.Open(h.path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() || !r.budget.take() {
		defer f.Close()
		return r.readAll(f, h.path)
	}
	h.f = f
	h.fd = f.Fd() // a regular file: blocking already, no poller
	return r.pread(h)
}

// readAll reads f to its end into the buffer (bounded by its size).
func (r *Reader) readAll(f *os.File, path string) ([]byte, error) {
	n := 0
	for {
		if n == len(r.buf) {
			return nil, &fs.PathError{Op: "read", Path: path, Err: ErrTooLong}
		}
		m, err := f.Read(r.buf[n:])
		n += m
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if m == 0 {
			break
		}
	}
	return r.buf[:n], nil
}

// Close closes every file r holds. r can be used again: it opens them anew.
func (r *Reader) Close() {
	if r.budget == nil {
		return
	}
	r.releaseDevice()
}

// devFiles are the files of the device a Reader read last.
type devFiles struct {
	name      string
	path      string
	id        fileID      // of the device directory: another one is another device
	text      [4]heldFile // hca_type, board_id, fw_ver, node_guid
	portsPath string
	portsList lister   // of ports/
	portNames []string // its directories, the ports, sorted; nil before the first listing
	ports     []portFiles
	stamp     dirStamp // of path
}

// portFiles are one port's files, in the order in which they are read.
type portFiles struct {
	dir                               string   // ports/<n>
	stamp                             dirStamp // of dir
	state, physState, rate, linkLayer heldFile
	counters, ext, hw                 heldSet
	hwList                            lister // of hw_counters/, with AllHWCounters
	hwAll                             bool   // hw.names is that listing
}

// heldSet is the files of one directory of a port, named by names.
type heldSet struct {
	dir   string
	names []string
	files []heldFile
	stamp dirStamp
}

// dirStamp is what a directory's stat says of its entries. A file
// replaced in it (written elsewhere and renamed over it, as the tests and
// the testbed write their sysfs trees; sysfs itself changes a value in
// place) changes the directory's mtime, and a descriptor held on the old
// file would go on reading the old value: its files are opened anew.
type dirStamp struct {
	id    fileID
	mtime int64
	ok    bool
}

// update records st and reports whether it differs from the last one.
func (s *dirStamp) update(st fs.FileInfo) bool {
	cur := dirStamp{id: idOf(st), mtime: st.ModTime().UnixNano(), ok: true}
	changed := s.ok && cur != *s
	*s = cur
	return changed
}

// replaced reports whether dir's entries changed since the last call.
func replaced(dir string, last *dirStamp) bool {
	st, err := os.Stat(dir)
	if err != nil {
		changed := last.ok
		*last = dirStamp{}
		return changed
	}
	return last.update(st)
}

// set makes s the files of its directory named by names, keeping those
// held when the names are the same as before.
func (r *Reader) set(s *heldSet, names []string) {
	if s.files != nil && equalNames(s.names, names) {
		return
	}
	r.releaseAll(s.files)
	s.names = names
	s.files = make([]heldFile, len(names))
	for i, n := range names {
		s.files[i].path = s.dir + "/" + n
	}
}

func equalNames(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func (r *Reader) releasePort(p *portFiles) {
	for _, h := range []*heldFile{&p.state, &p.physState, &p.rate, &p.linkLayer} {
		r.release(h)
	}
	r.releaseAll(p.counters.files)
	r.releaseAll(p.ext.files)
	r.releaseAll(p.hw.files)
}

func (r *Reader) releaseDevice() {
	d := &r.dev
	for i := range d.text {
		r.release(&d.text[i])
	}
	for i := range d.ports {
		r.releasePort(&d.ports[i])
	}
	*d = devFiles{}
}

// device makes r.dev the files of device name at devPath, whose
// directory is id.
func (r *Reader) device(name, devPath string, id fileID) *devFiles {
	d := &r.dev
	if d.name == name && d.path == devPath && d.id == id {
		return d
	}
	r.releaseDevice()
	d.name, d.path, d.id = name, devPath, id
	for i, f := range [...]string{"hca_type", "board_id", "fw_ver", "node_guid"} {
		d.text[i].path = devPath + "/" + f
	}
	d.portsPath = devPath + "/ports"
	return d
}

// setPorts makes d's ports those named by names (a new listing): the
// files of a port whose name is in both stay held.
func (r *Reader) setPorts(d *devFiles, names []string) {
	old, oldNames := d.ports, d.portNames
	ports := make([]portFiles, len(names))
	for i, pn := range names {
		for j, on := range oldNames {
			if on == pn {
				ports[i], old[j] = old[j], portFiles{}
				break
			}
		}
		if ports[i].state.path == "" {
			pp := d.portsPath + "/" + pn
			ports[i].state.path = pp + "/state"
			ports[i].physState.path = pp + "/phys_state"
			ports[i].rate.path = pp + "/rate"
			ports[i].linkLayer.path = pp + "/link_layer"
			ports[i].counters.dir = pp + "/counters"
			ports[i].ext.dir = pp + "/counters_ext"
			ports[i].hw.dir = pp + "/hw_counters"
		}
	}
	for i := range old {
		r.releasePort(&old[i])
	}
	d.ports, d.portNames = ports, names
}
