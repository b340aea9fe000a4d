package sysfs // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ibreceiver/internal/sysfs"

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
)

// ErrTooLong is returned for files larger than the read buffer; sysfs
// attributes are at most one page.
var ErrTooLong = errors.New("file too long")

// ErrNotDir is returned by ReadDevice when the device entry is not a directory.
var ErrNotDir = errors.New("not a directory")

// ClassDir is the path of the InfiniBand class below the sysfs root.
const ClassDir = "class/infiniband"

// Names of the files in ports/<n>/counters that the reader reads. Files that
// do not exist are skipped silently (not every driver exposes every counter).
const (
	PortXmitData    = "port_xmit_data"    // 32-bit words (unit: 4 bytes)
	PortRcvData     = "port_rcv_data"     // 32-bit words (unit: 4 bytes)
	PortXmitPackets = "port_xmit_packets" // packets
	PortRcvPackets  = "port_rcv_packets"  // packets
	PortXmitWait    = "port_xmit_wait"    // ticks
)

// ErrorCounterNames are the error counters of ports/<n>/counters.
var ErrorCounterNames = []string{
	"symbol_error",
	"link_downed",
	"link_error_recovery",
	"port_rcv_errors",
	"port_rcv_remote_physical_errors",
	"port_rcv_switch_relay_errors",
	"port_xmit_discards",
	"port_rcv_constraint_errors",
	"port_xmit_constraint_errors",
	"local_link_integrity_errors",
	"excessive_buffer_overrun_errors",
	"VL15_dropped",
}

// PortCounterNames lists every file of ports/<n>/counters the reader reads,
// in the order in which they appear in Port.Counters.
var PortCounterNames = append([]string{
	PortXmitData, PortRcvData, PortXmitPackets, PortRcvPackets, PortXmitWait,
}, ErrorCounterNames...)

// HWCounterLifespan is the file of ports/<n>/hw_counters that holds the
// refresh interval of the others; AllHWCounters skips it.
const HWCounterLifespan = "lifespan"

// ExtCounterNames lists the files of ports/<n>/counters_ext the reader reads:
// the 64-bit variants of the data and packet counters (data in 4-byte words).
var ExtCounterNames = []string{
	PortXmitData + "_64",
	PortRcvData + "_64",
	PortXmitPackets + "_64",
	PortRcvPackets + "_64",
}

// Counter is one counter file.
type Counter struct {
	Name  string // file name, e.g. "port_xmit_data"
	Value uint64 // valid when Err is nil
	Err   error  // read or parse error, wrapped with the path; nil when Value is valid
}

// Text is an optional text file (hca_type, link_layer, ...).
type Text struct {
	Value   string // trimmed contents
	Present bool   // the file exists and was read
	Err     error  // read error other than "does not exist"
}

// State is a parsed state or phys_state file ("4: ACTIVE").
type State struct {
	Code    int64
	Text    string
	Present bool  // the file exists and parsed
	Err     error // read or parse error
}

// Rate is a parsed rate file.
type Rate struct {
	BytesPerSecond uint64
	Present        bool  // the file exists and parsed
	Err            error // read or parse error
}

// Port is one directory below <device>/ports.
type Port struct {
	Name        string // directory name, the port number, e.g. "1"
	State       State
	PhysState   State
	Rate        Rate
	LinkLayer   Text
	Counters    []Counter // files of counters/ named in PortCounterNames (or ReadOptions.Counters) that exist
	ExtCounters []Counter // files of counters_ext/ named in ExtCounterNames (or ReadOptions.ExtCounters) that exist
	HWCounters  []Counter // files of hw_counters/ (all, or those asked for)
	Errs        []error   // directory listing errors (other than "does not exist")
}

// Device is one directory below class/infiniband.
type Device struct {
	Name     string
	HCAType  Text
	BoardID  Text
	FWVer    Text
	NodeGUID Text
	Ports    []Port  // sorted by name
	Errs     []error // directory listing errors (other than "does not exist")
}

// ReadOptions selects what ReadDevice reads beyond the fixed counter sets.
type ReadOptions struct {
	// HWCounters lists the file names of ports/<n>/hw_counters to read;
	// missing files are skipped. When AllHWCounters is true every file of
	// the directory except "lifespan" is read instead.
	HWCounters    []string
	AllHWCounters bool
	// Counters and ExtCounters, when set, replace PortCounterNames and
	// ExtCounterNames: the files of counters/ and counters_ext/ to read
	// (node_exporter's set is larger).
	Counters, ExtCounters []string
}

// Reader reads the InfiniBand class of one sysfs root. It reuses one read
// buffer and is therefore not safe for concurrent use, except Current.
//
// It keeps the paths of the device it read last, and, with a FileBudget
// (NewHeldReader), holds that device's files open and reads them again
// with pread: a device or port that comes or goes (a new listing) or a
// read that fails opens them anew. Close closes them.
type Reader struct {
	classPath string
	buf       []byte
	budget    *FileBudget // nil: open, read, close every file every time
	dev       devFiles
	classList lister   // of class/infiniband
	devNames  []string // its names, sorted

	mu      sync.Mutex
	current string // the path being opened or read, "" between reads
}

// Current returns the path a read of this Reader is blocked in (or busy
// with), "" when none is running. Safe to call from another goroutine, to
// name the file of a read that does not return.
func (r *Reader) Current() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.current
}

func (r *Reader) setCurrent(path string) {
	r.mu.Lock()
	r.current = path
	r.mu.Unlock()
}

// NewReader returns a Reader for sysfsRoot (usually "/sys") that holds no
// file open between reads.
func NewReader(sysfsRoot string) *Reader {
	return &Reader{
		classPath: joinPath(sysfsRoot, ClassDir),
		buf:       make([]byte, 4096),
	}
}

// NewHeldReader returns a Reader for sysfsRoot that holds the files of the
// device it reads open, within budget (shared by the Readers of one
// receiver), until the device's files change or Close.
func NewHeldReader(sysfsRoot string, budget *FileBudget) *Reader {
	r := NewReader(sysfsRoot)
	r.budget = budget
	return r
}

// ClassPath returns <root>/class/infiniband.
func (r *Reader) ClassPath() string { return r.classPath }

// DeviceNames returns the sorted names of the devices under
// <root>/class/infiniband. When that directory does not exist the error
// satisfies errors.Is(err, fs.ErrNotExist). The slice is the Reader's,
// the same while the listing does not change: do not modify it.
func (r *Reader) DeviceNames() ([]string, error) {
	raw, changed, err := r.classList.list(r.classPath)
	if err != nil {
		r.classList, r.devNames = lister{}, nil
		return nil, err
	}
	if changed || r.devNames == nil {
		r.devNames = slices.Clone(raw)
		slices.Sort(r.devNames)
	}
	return r.devNames, nil
}

// ReadDevice reads device name into dst, reusing dst's slices and unchanged
// strings. It fails only when the device directory itself cannot be read
// (e.g. the device vanished); problems with single files are recorded in the
// Err fields of dst.
func (r *Reader) ReadDevice(name string, opts ReadOptions, dst *Device) error {
	defer r.setCurrent("")
	devPath := r.dev.path
	if r.dev.name != name {
		devPath = joinPath(r.classPath, name)
	}
	r.setCurrent(devPath)
	st, err := os.Stat(devPath)
	if err != nil {
		r.releaseDevice()
		return err
	}
	if !st.IsDir() {
		r.releaseDevice()
		return &fs.PathError{Op: "read", Path: devPath, Err: ErrNotDir}
	}
	d := r.device(name, devPath, idOf(st))
	if d.stamp.update(st) {
		for i := range d.text {
			r.release(&d.text[i])
		}
	}
	dst.Name = name
	dst.Errs = dst.Errs[:0]
	r.readText(&d.text[0], &dst.HCAType)
	r.readText(&d.text[1], &dst.BoardID)
	r.readText(&d.text[2], &dst.FWVer)
	r.readText(&d.text[3], &dst.NodeGUID)

	listing, changed, err := d.portsList.list(d.portsPath)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			dst.Errs = append(dst.Errs, err)
		}
		d.portsList = lister{} // the next listing is a new one
		listing, changed = nil, true
	}
	if changed || d.portNames == nil {
		// A new listing: keep directories only (a stray file is not a
		// port), in port order.
		portNames := slices.DeleteFunc(slices.Clone(listing), func(pn string) bool {
			st, err := os.Stat(d.portsPath + "/" + pn)
			return err != nil || !st.IsDir()
		})
		if portNames == nil {
			portNames = []string{}
		}
		slices.SortFunc(portNames, comparePortNames)
		r.setPorts(d, portNames)
	}
	if cap(dst.Ports) < len(d.portNames) {
		dst.Ports = append(dst.Ports[:cap(dst.Ports)], make([]Port, len(d.portNames)-cap(dst.Ports))...)
	}
	dst.Ports = dst.Ports[:len(d.portNames)]
	for i, pn := range d.portNames {
		r.readPort(&d.ports[i], pn, opts, &dst.Ports[i])
	}
	return nil
}

func (r *Reader) readPort(pf *portFiles, name string, opts ReadOptions, p *Port) {
	p.Name = name
	p.Errs = p.Errs[:0]
	if r.budget != nil {
		if pf.dir == "" {
			pf.dir = filepath.Dir(pf.state.path)
		}
		if replaced(pf.dir, &pf.stamp) {
			for _, h := range []*heldFile{&pf.state, &pf.physState, &pf.rate, &pf.linkLayer} {
				r.release(h)
			}
		}
	}
	r.readState(&pf.state, &p.State)
	r.readState(&pf.physState, &p.PhysState)
	r.readRate(&pf.rate, &p.Rate)
	r.readText(&pf.linkLayer, &p.LinkLayer)

	counters, ext := PortCounterNames, ExtCounterNames
	if opts.Counters != nil {
		counters = opts.Counters
	}
	if opts.ExtCounters != nil {
		ext = opts.ExtCounters
	}
	r.set(&pf.counters, counters)
	r.set(&pf.ext, ext)
	p.Counters = r.readCounters(&pf.counters, p.Counters[:0])
	p.ExtCounters = r.readCounters(&pf.ext, p.ExtCounters[:0])

	hwNames := opts.HWCounters
	if opts.AllHWCounters {
		listing, changed, err := pf.hwList.list(pf.hw.dir)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				p.Errs = append(p.Errs, err)
			}
			pf.hwList = lister{}
			listing, changed = nil, true
		}
		hwNames = pf.hw.names
		if changed || !pf.hwAll {
			// "lifespan" is a setting (milliseconds between refreshes of
			// the hardware statistics), not a counter.
			hwNames = slices.DeleteFunc(slices.Clone(listing), func(n string) bool { return n == HWCounterLifespan })
			slices.Sort(hwNames)
		}
	}
	pf.hwAll = opts.AllHWCounters
	r.set(&pf.hw, hwNames)
	p.HWCounters = r.readCounters(&pf.hw, p.HWCounters[:0])
}

// readCounters appends the counters of s that exist.
func (r *Reader) readCounters(s *heldSet, dst []Counter) []Counter {
	if r.budget != nil && replaced(s.dir, &s.stamp) {
		r.releaseAll(s.files)
	}
	checked := false
	for i := range s.files {
		h := &s.files[i]
		b, err := r.readHeld(h)
		if errors.Is(err, fs.ErrNotExist) {
			if !checked {
				checked = true
				if isMissingDir(s.dir) {
					// Whole directory absent: do not try every name.
					return dst
				}
			}
			continue
		}
		c := Counter{Name: s.names[i]}
		if err == nil {
			c.Value, err = ParseCounter(b)
			if err != nil {
				err = &fs.PathError{Op: "parse", Path: h.path, Err: err}
			}
		}
		c.Err = err
		dst = append(dst, c)
	}
	return dst
}

func isMissingDir(dir string) bool {
	_, err := os.Stat(dir)
	return errors.Is(err, fs.ErrNotExist)
}

func (r *Reader) readText(h *heldFile, t *Text) {
	b, err := r.readHeld(h)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		t.Present, t.Err, t.Value = false, nil, ""
	case err != nil:
		t.Present, t.Err, t.Value = false, err, ""
	default:
		b = trimSpace(b)
		if string(b) != t.Value { // keep the old string when unchanged: no allocation
			t.Value = string(b)
		}
		t.Present, t.Err = true, nil
	}
}

func (r *Reader) readState(h *heldFile, s *State) {
	b, err := r.readHeld(h)
	if err != nil {
		*s = State{Err: err}
		if errors.Is(err, fs.ErrNotExist) {
			s.Err = nil
		}
		return
	}
	code, text, err := ParseState(b)
	if err != nil {
		*s = State{Err: &fs.PathError{Op: "parse", Path: h.path, Err: err}}
		return
	}
	*s = State{Code: code, Text: text, Present: true}
}

func (r *Reader) readRate(h *heldFile, rt *Rate) {
	b, err := r.readHeld(h)
	if err != nil {
		*rt = Rate{Err: err}
		if errors.Is(err, fs.ErrNotExist) {
			rt.Err = nil
		}
		return
	}
	v, err := ParseRate(b)
	if err != nil {
		*rt = Rate{Err: &fs.PathError{Op: "parse", Path: h.path, Err: err}}
		return
	}
	*rt = Rate{BytesPerSecond: v, Present: true}
}

// readFile reads a whole (small) file into the reader's buffer. The result is
// valid until the next call. Errors are *fs.PathError values.
func (r *Reader) readFile(path string) ([]byte, error) {
	r.setCurrent(path)
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return r.readAll(f, path)
}

// comparePortNames orders port directories numerically ("2" < "10"), falling
// back to lexical order for non-numeric names.
func comparePortNames(a, b string) int {
	if len(a) != len(b) && isDigits(a) && isDigits(b) {
		if len(a) < len(b) {
			return -1
		}
		return 1
	}
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func joinPath(a, b string) string {
	if a == "" {
		return b
	}
	if a[len(a)-1] == '/' {
		return a + b
	}
	return a + "/" + b
}
