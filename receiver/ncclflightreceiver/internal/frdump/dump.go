// Package frdump is the schema of PyTorch's NCCL flight recorder dumps
// (torch.distributed FlightRecorder, versions "2.3" to "2.10"), decoded from
// either of the forms torch writes: pickle (what it puts on disk) and JSON
// (what its dump_nccl_trace_json handler returns). Everything downstream —
// spans, metrics, the cross-rank analysis — works on these types only.
package frdump // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"

import (
	"fmt"
	"strconv"
	"strings"
)

// Version is a dump's schema version. Compare major and minor as integers:
// "2.10" is newer than "2.9".
type Version struct {
	Major, Minor int
	Raw          string
}

// ParseVersion parses "major.minor".
func ParseVersion(s string) (Version, error) {
	maj, min, ok := strings.Cut(strings.TrimSpace(s), ".")
	a, err1 := strconv.Atoi(maj)
	b, err2 := strconv.Atoi(min)
	if !ok || err1 != nil || err2 != nil || a < 0 || b < 0 {
		return Version{Raw: s}, fmt.Errorf("version %q is not major.minor", s)
	}
	return Version{Major: a, Minor: b, Raw: s}, nil
}

// Less reports whether v is older than o.
func (v Version) Less(o Version) bool {
	if v.Major != o.Major {
		return v.Major < o.Major
	}
	return v.Minor < o.Minor
}

func (v Version) String() string { return v.Raw }

// Oldest and Newest are the schema versions this package knows. A dump
// outside them is parsed for what is known, with a warning.
var (
	Oldest = Version{Major: 2, Minor: 3, Raw: "2.3"}
	Newest = Version{Major: 2, Minor: 10, Raw: "2.10"}
)

// Dump is one rank's flight recorder dump.
type Dump struct {
	Version Version
	// PGConfig by process group name: its description and member ranks.
	PGConfig map[string]PGConfig
	// PGStatus by process group id: the last collective each stage reached.
	PGStatus map[string]PGStatus
	Entries  []Entry
	// CommLibVersion is nccl_version (up to 2.7) or comm_lib_version (2.10).
	CommLibVersion string
	// DumpedAtNs is when the dump was written (epoch ns; the dump file's
	// mtime, on the clock of the node that wrote it), set by the reader, not
	// part of the dump; 0 when unknown. The cross-rank analysis compares it
	// with the rank's newest enqueue to tell a rank that stopped from one
	// whose dump was merely taken earlier.
	DumpedAtNs int64
}

// PGConfig describes a process group.
type PGConfig struct {
	Name  string
	Desc  string
	Ranks []int // parsed from the dump's string form "[0, 1]"; nil if unparsable
}

// PGStatus is the progress of one process group on this rank; -1 means none.
type PGStatus struct {
	LastEnqueued  int64
	LastStarted   int64
	LastCompleted int64
}

// Entry states.
const (
	StateScheduled = "scheduled"
	StateStarted   = "started"
	StateCompleted = "completed"
)

// Entry is one collective or point-to-point operation as this rank saw it.
type Entry struct {
	RecordID        int64
	PGID            int64
	PGName, PGDesc  string // process_group: a (name, desc) tuple
	CollectiveSeqID int64
	P2PSeqID        int64
	OpID            int64
	// ProfilingName is e.g. nccl:all_reduce, nccl:send 1->2, nccl:recv 3<-0,
	// nccl:coalesced, or xccl:... on XPU.
	ProfilingName string
	// TimeCreatedNs is when the rank enqueued the operation (epoch ns, the
	// rank's own clock).
	TimeCreatedNs int64
	// DurationMs is measured with CUDA events; only with
	// TORCH_NCCL_ENABLE_TIMING=1 (HasDuration).
	DurationMs   float64
	HasDuration  bool
	InputSizes   [][]int64
	OutputSizes  [][]int64
	InputDtypes  []string
	OutputDtypes []string
	State        string
	// The watchdog's poll times (0 when unknown): not precise timings.
	TimeDiscoveredStartedNs   int64
	TimeDiscoveredCompletedNs int64
	// Retired but not completed means the watchdog gave up: a timeout.
	Retired    bool
	TimeoutMs  int64
	IsP2P      bool
	ThreadName string
	ThreadID   string
	Frames     []Frame
}

// Frame is one Python stack frame (pickle dumps only).
type Frame struct {
	Name     string
	Filename string
	Line     int64
}

// TimedOut reports whether the watchdog retired the entry without seeing it
// complete.
func (e *Entry) TimedOut() bool { return e.Retired && e.State != StateCompleted }
