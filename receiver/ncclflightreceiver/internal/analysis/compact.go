package analysis

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"
)

// What the analysis keeps of a rank's dump. A dump of 20,000 entries maps
// to some 44 MiB of frdump.Entry values (sizes, dtypes and 16 stack frames
// each); the checks need far less of each entry, and most of what they
// need repeats from entry to entry (the process group, the collective, its
// shapes and dtypes, its state). A Rank holds one Op per entry: the numbers
// that differ per operation and a pointer to an OpInfo shared by every
// operation that looks the same. Stacks are kept only where a finding can
// quote them: the operations not completed (a missing_ranks finding quotes
// those of the ranks present, a timeout those of the ranks that timed out)
// and the rank's newest stack (a hang quotes it for a culprit, missing_ranks
// for a missing rank). BenchmarkRankBytes measures the result.

// Rank is one rank's dump as the analysis keeps it; build one with a
// Builder (or Compact). Treat it as read-only: the receiver keeps it for
// later analyses of the job and builds spans from its Ops.
type Rank struct {
	Rank int
	// DumpedAtNs is the dump's frdump.Dump.DumpedAtNs.
	DumpedAtNs int64
	// PGConfig and PGStatus are the dump's.
	PGConfig map[string]frdump.PGConfig
	PGStatus map[string]frdump.PGStatus
	// Ops are the dump's entries, in dump order.
	Ops []Op
	// NewestStack is the Python stack of the newest entry (by record id)
	// that has frames, rendered (stackText); "" when none has.
	NewestStack string
	// Incomplete counts the Ops not completed (scheduled or started).
	Incomplete int
	// Bytes estimates the memory the Rank holds (its Ops, OpInfos, strings,
	// process groups and the maps holding them).
	Bytes int64
}

// Op is one entry of a dump: what differs per operation, the rest in its
// OpInfo (whose fields read through Op).
type Op struct {
	*OpInfo
	RecordID        int64
	PGID            int64
	CollectiveSeqID int64
	P2PSeqID        int64
	OpID            int64
	// TimeCreatedNs, TimeDiscoveredStartedNs and TimeDiscoveredCompletedNs
	// are the entry's (the watchdog's times 0 when unknown).
	TimeCreatedNs             int64
	TimeDiscoveredStartedNs   int64
	TimeDiscoveredCompletedNs int64
	// DurationMs is set when HasDuration.
	DurationMs float64
}

// OpInfo is what operations that look the same share: one per distinct
// value in a Rank.
type OpInfo struct {
	PGName, PGDesc string
	ProfilingName  string
	State          string
	InputSizes     [][]int64
	OutputSizes    [][]int64
	InputDtypes    []string
	OutputDtypes   []string
	TimeoutMs      int64
	// Stack is the rendered Python stack of an operation not completed;
	// "" for completed ones and where the dump has no frames.
	Stack       string
	HasDuration bool
	Retired     bool
	IsP2P       bool
}

// TimedOut reports whether the watchdog retired the operation without
// seeing it complete.
func (i *OpInfo) TimedOut() bool { return i.Retired && i.State != frdump.StateCompleted }

// ErrRankBudget: a Builder's Rank would hold more than its Limit.
var ErrRankBudget = errors.New("analysis: the rank's records would exceed their memory limit")

// Sizes of what a Rank holds, for Rank.Bytes.
const (
	opBytes     = int64(unsafe.Sizeof(Op{}))
	opInfoBytes = int64(unsafe.Sizeof(OpInfo{}))
	// mapEntryBytes approximates the cost of one map entry beyond its key
	// and value (the bucket's share, the tophash, the load factor).
	mapEntryBytes = 48
	stringBytes   = int64(unsafe.Sizeof(""))
	sliceBytes    = int64(unsafe.Sizeof([]int64(nil)))
	rankBytes     = int64(unsafe.Sizeof(Rank{}))
)

// OpBytes is the size of one Op: what every entry of a retained dump costs,
// besides the OpInfos and strings the Rank shares among its entries.
const OpBytes = opBytes

// Builder makes a Rank from a dump's entries, one at a time, as
// frdump.Options.Entry hands them over: the entries need never be held
// at once.
type Builder struct {
	// Limit, when positive, caps Rank.Bytes: Add returns ErrRankBudget
	// once the Rank would hold more.
	Limit int64

	rank        Rank
	infos       map[string]*OpInfo
	strs        map[string]string // interned strings (stacks included)
	key         []byte
	newest      int64
	newestSeen  bool
	newestStack []frdump.Frame
	bytes       int64
}

// NewBuilder starts the Rank of rank; sizeHint is the expected number of
// entries (0 when unknown).
func NewBuilder(rank int, sizeHint int) *Builder {
	b := &Builder{infos: map[string]*OpInfo{}, strs: map[string]string{}, bytes: rankBytes}
	b.rank.Rank = rank
	if sizeHint > 0 {
		b.rank.Ops = make([]Op, 0, sizeHint)
		b.bytes += int64(sizeHint) * opBytes
	}
	return b
}

// Bytes is what the Rank built so far holds (estimated).
func (b *Builder) Bytes() int64 { return b.bytes }

// Grow makes room for n more Ops at once (the number of entries, when the
// dump says it before the first), charging it.
func (b *Builder) Grow(n int) error {
	if n <= cap(b.rank.Ops)-len(b.rank.Ops) {
		return nil
	}
	more := n - (cap(b.rank.Ops) - len(b.rank.Ops))
	if err := b.charge(int64(more) * opBytes); err != nil {
		return err
	}
	ops := make([]Op, len(b.rank.Ops), cap(b.rank.Ops)+more) // exactly: what is charged
	copy(ops, b.rank.Ops)
	b.rank.Ops = ops
	return nil
}

// Add keeps what the analysis and the spans need of e. e is not retained:
// a caller may reuse it (and its slices) once Add returns.
func (b *Builder) Add(e *frdump.Entry) error {
	if len(e.Frames) > 0 && (!b.newestSeen || e.RecordID > b.newest) {
		b.newest, b.newestSeen = e.RecordID, true
		b.newestStack = append(b.newestStack[:0], e.Frames...)
	}
	var stack string
	if e.State != frdump.StateCompleted {
		stack = stackText(e.Frames)
		b.rank.Incomplete++
	}
	info, err := b.info(e, stack)
	if err != nil {
		return err
	}
	if len(b.rank.Ops) == cap(b.rank.Ops) {
		if err := b.Grow(max(16, cap(b.rank.Ops))); err != nil {
			return err
		}
	}
	b.rank.Ops = append(b.rank.Ops, Op{
		OpInfo: info, RecordID: e.RecordID, PGID: e.PGID, CollectiveSeqID: e.CollectiveSeqID, P2PSeqID: e.P2PSeqID,
		OpID: e.OpID, TimeCreatedNs: e.TimeCreatedNs, TimeDiscoveredStartedNs: e.TimeDiscoveredStartedNs,
		TimeDiscoveredCompletedNs: e.TimeDiscoveredCompletedNs, DurationMs: e.DurationMs,
	})
	return nil
}

func (b *Builder) charge(n int64) error {
	b.bytes += n
	if b.Limit > 0 && b.bytes > b.Limit {
		return fmt.Errorf("%w: more than %d bytes", ErrRankBudget, b.Limit)
	}
	return nil
}

// info returns the interned OpInfo of e.
func (b *Builder) info(e *frdump.Entry, stack string) (*OpInfo, error) {
	k := b.key[:0]
	for _, s := range []string{e.PGName, e.PGDesc, e.ProfilingName, e.State, stack} {
		k = strconv.AppendInt(k, int64(len(s)), 10)
		k = append(k, ':')
		k = append(k, s...)
	}
	for _, sizes := range [][][]int64{e.InputSizes, e.OutputSizes} {
		k = strconv.AppendInt(k, int64(len(sizes)), 10)
		for _, dims := range sizes {
			k = append(k, '[')
			for _, d := range dims {
				k = strconv.AppendInt(k, d, 10)
				k = append(k, ',')
			}
		}
		k = append(k, '|')
	}
	for _, ss := range [][]string{e.InputDtypes, e.OutputDtypes} {
		k = strconv.AppendInt(k, int64(len(ss)), 10)
		for _, s := range ss {
			k = strconv.AppendInt(k, int64(len(s)), 10)
			k = append(k, ':')
			k = append(k, s...)
		}
		k = append(k, '|')
	}
	k = strconv.AppendInt(k, e.TimeoutMs, 10)
	for _, f := range []bool{e.HasDuration, e.Retired, e.IsP2P} {
		k = strconv.AppendBool(k, f)
	}
	b.key = k
	if info, ok := b.infos[string(k)]; ok {
		return info, nil
	}
	info := &OpInfo{
		PGName: b.intern(e.PGName), PGDesc: b.intern(e.PGDesc), ProfilingName: b.intern(e.ProfilingName),
		State: b.intern(e.State), Stack: b.intern(stack),
		InputSizes: cloneSizes(e.InputSizes), OutputSizes: cloneSizes(e.OutputSizes),
		InputDtypes: b.internAll(e.InputDtypes), OutputDtypes: b.internAll(e.OutputDtypes),
		TimeoutMs: e.TimeoutMs, HasDuration: e.HasDuration, Retired: e.Retired, IsP2P: e.IsP2P,
	}
	cost := opInfoBytes + int64(len(k)) + mapEntryBytes + stringBytes + 8 +
		sizesBytes(info.InputSizes) + sizesBytes(info.OutputSizes) +
		int64(len(info.InputDtypes)+len(info.OutputDtypes))*stringBytes
	if err := b.charge(cost); err != nil {
		return nil, err
	}
	b.infos[string(k)] = info
	return info, nil
}

// intern returns s, stored once per Rank (a copy: s may point into a
// decoded dump the caller drops).
func (b *Builder) intern(s string) string {
	if s == "" {
		return ""
	}
	if v, ok := b.strs[s]; ok {
		return v
	}
	v := strings.Clone(s)
	b.strs[v] = v
	b.bytes += int64(len(v)) + 2*stringBytes + mapEntryBytes
	return v
}

func (b *Builder) internAll(ss []string) []string {
	if ss == nil {
		return nil
	}
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = b.intern(s)
	}
	return out
}

func cloneSizes(sizes [][]int64) [][]int64 {
	if sizes == nil {
		return nil
	}
	out := make([][]int64, len(sizes))
	for i, dims := range sizes {
		out[i] = slices.Clone(dims)
	}
	return out
}

func sizesBytes(sizes [][]int64) int64 {
	n := int64(len(sizes)) * sliceBytes
	for _, dims := range sizes {
		n += int64(len(dims)) * 8
	}
	return n
}

// Finish completes the Rank with what the dump holds besides its entries
// (its Entries are not read: hand them to Add). The Builder must not be
// used afterwards.
func (b *Builder) Finish(d *frdump.Dump) (*Rank, error) {
	r := &b.rank
	r.NewestStack = b.intern(stackText(b.newestStack))
	if d != nil {
		r.DumpedAtNs = d.DumpedAtNs
		r.PGStatus = d.PGStatus
		r.PGConfig = d.PGConfig
		cost := int64(len(d.PGStatus)) * (int64(unsafe.Sizeof(frdump.PGStatus{})) + mapEntryBytes + stringBytes)
		for name, cfg := range d.PGConfig {
			cost += int64(len(name)+len(cfg.Name)+len(cfg.Desc)) + int64(unsafe.Sizeof(cfg)) + mapEntryBytes + stringBytes +
				int64(len(cfg.Ranks))*int64(unsafe.Sizeof(0))
		}
		for id := range d.PGStatus {
			cost += int64(len(id))
		}
		if err := b.charge(cost); err != nil {
			return nil, err
		}
	}
	// Unused capacity is dropped so that Bytes is what is held.
	if spare := cap(r.Ops) - len(r.Ops); spare > 0 {
		r.Ops = slices.Clip(r.Ops)
		if spare > len(r.Ops)/8 {
			r.Ops = slices.Clone(r.Ops)
			b.bytes -= int64(spare) * opBytes
		}
	}
	r.Bytes = b.bytes
	b.infos, b.strs, b.newestStack = nil, nil, nil
	return r, nil
}

// Compact makes the Rank of a whole dump.
func Compact(rank int, d *frdump.Dump) *Rank {
	b := NewBuilder(rank, len(d.Entries))
	for i := range d.Entries {
		_ = b.Add(&d.Entries[i]) // no Limit: never fails
	}
	r, _ := b.Finish(d)
	return r
}
