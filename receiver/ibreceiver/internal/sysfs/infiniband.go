package sysfs // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ibreceiver/internal/sysfs"

import (
	"errors"
	"io"
	"io/fs"
	"os"
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
type Reader struct {
	classPath string
	buf       []byte

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

// NewReader returns a Reader for sysfsRoot (usually "/sys").
func NewReader(sysfsRoot string) *Reader {
	return &Reader{
		classPath: joinPath(sysfsRoot, ClassDir),
		buf:       make([]byte, 4096),
	}
}

// ClassPath returns <root>/class/infiniband.
func (r *Reader) ClassPath() string { return r.classPath }

// DeviceNames returns the sorted names of the devices under
// <root>/class/infiniband. When that directory does not exist the error
// satisfies errors.Is(err, fs.ErrNotExist).
func (r *Reader) DeviceNames() ([]string, error) {
	names, err := readDirNames(r.classPath)
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	return names, nil
}

// ReadDevice reads device name into dst, reusing dst's slices and unchanged
// strings. It fails only when the device directory itself cannot be read
// (e.g. the device vanished); problems with single files are recorded in the
// Err fields of dst.
func (r *Reader) ReadDevice(name string, opts ReadOptions, dst *Device) error {
	defer r.setCurrent("")
	devPath := joinPath(r.classPath, name)
	r.setCurrent(devPath)
	st, err := os.Stat(devPath)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return &fs.PathError{Op: "read", Path: devPath, Err: ErrNotDir}
	}
	dst.Name = name
	dst.Errs = dst.Errs[:0]
	r.readText(devPath, "hca_type", &dst.HCAType)
	r.readText(devPath, "board_id", &dst.BoardID)
	r.readText(devPath, "fw_ver", &dst.FWVer)
	r.readText(devPath, "node_guid", &dst.NodeGUID)

	portsPath := devPath + "/ports"
	portNames, err := readDirNames(portsPath)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		dst.Errs = append(dst.Errs, err)
	}
	// Keep directories only (a stray file is not a port).
	portNames = slices.DeleteFunc(portNames, func(pn string) bool {
		st, err := os.Stat(portsPath + "/" + pn)
		return err != nil || !st.IsDir()
	})
	slices.SortFunc(portNames, comparePortNames)
	if cap(dst.Ports) < len(portNames) {
		dst.Ports = append(dst.Ports[:cap(dst.Ports)], make([]Port, len(portNames)-cap(dst.Ports))...)
	}
	dst.Ports = dst.Ports[:len(portNames)]
	for i, pn := range portNames {
		r.readPort(portsPath+"/"+pn, pn, opts, &dst.Ports[i])
	}
	return nil
}

func (r *Reader) readPort(portPath, name string, opts ReadOptions, p *Port) {
	p.Name = name
	p.Errs = p.Errs[:0]
	r.readState(portPath+"/state", &p.State)
	r.readState(portPath+"/phys_state", &p.PhysState)
	r.readRate(portPath+"/rate", &p.Rate)
	r.readText(portPath, "link_layer", &p.LinkLayer)

	counters, ext := PortCounterNames, ExtCounterNames
	if opts.Counters != nil {
		counters = opts.Counters
	}
	if opts.ExtCounters != nil {
		ext = opts.ExtCounters
	}
	p.Counters = r.readCounters(portPath+"/counters", counters, p.Counters[:0])
	p.ExtCounters = r.readCounters(portPath+"/counters_ext", ext, p.ExtCounters[:0])

	hwPath := portPath + "/hw_counters"
	hwNames := opts.HWCounters
	if opts.AllHWCounters {
		var err error
		hwNames, err = readDirNames(hwPath)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			p.Errs = append(p.Errs, err)
		}
		// "lifespan" is a setting (milliseconds between refreshes of the
		// hardware statistics), not a counter.
		hwNames = slices.DeleteFunc(hwNames, func(n string) bool { return n == HWCounterLifespan })
		slices.Sort(hwNames)
	}
	p.HWCounters = r.readCounters(hwPath, hwNames, p.HWCounters[:0])
}

// readCounters appends the counters of dir named in names that exist.
func (r *Reader) readCounters(dir string, names []string, dst []Counter) []Counter {
	if len(names) == 0 {
		return dst
	}
	checked := false
	for _, n := range names {
		b, err := r.readFile(dir + "/" + n)
		if errors.Is(err, fs.ErrNotExist) {
			if !checked {
				checked = true
				if isMissingDir(dir) {
					// Whole directory absent: do not try every name.
					return dst
				}
			}
			continue
		}
		c := Counter{Name: n}
		if err == nil {
			c.Value, err = ParseCounter(b)
			if err != nil {
				err = &fs.PathError{Op: "parse", Path: dir + "/" + n, Err: err}
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

func (r *Reader) readText(dir, name string, t *Text) {
	path := dir + "/" + name
	b, err := r.readFile(path)
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

func (r *Reader) readState(path string, s *State) {
	b, err := r.readFile(path)
	if err != nil {
		*s = State{Err: err}
		if errors.Is(err, fs.ErrNotExist) {
			s.Err = nil
		}
		return
	}
	code, text, err := ParseState(b)
	if err != nil {
		*s = State{Err: &fs.PathError{Op: "parse", Path: path, Err: err}}
		return
	}
	*s = State{Code: code, Text: text, Present: true}
}

func (r *Reader) readRate(path string, rt *Rate) {
	b, err := r.readFile(path)
	if err != nil {
		*rt = Rate{Err: err}
		if errors.Is(err, fs.ErrNotExist) {
			rt.Err = nil
		}
		return
	}
	v, err := ParseRate(b)
	if err != nil {
		*rt = Rate{Err: &fs.PathError{Op: "parse", Path: path, Err: err}}
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

func readDirNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
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
