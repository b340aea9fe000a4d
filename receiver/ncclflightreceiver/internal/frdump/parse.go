package frdump // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/pickle"
)

// Options bounds the work and the memory of one Parse. A zero field takes
// its default. The defaults fit a node agent with a 256 MiB memory limit:
// torch's default ring buffer (TORCH_NCCL_TRACE_BUFFER_SIZE=2000) makes a
// pickle of some 370 KB that costs 5 MiB of heap to parse; the largest
// dumps the defaults admit cost at most 56 MiB (pickle) or 92 MiB (JSON),
// and so do those they refuse (BENCHMARKS.md, issue 19).
type Options struct {
	// MaxBytes caps the size of a dump (default 8 MiB for a pickle, 12 MiB
	// for JSON). The largest dumps the other defaults admit are some
	// 3.5 MB of pickle (20,000 entries of 16 frames) or 11 MB of JSON
	// (20,000 entries, no frames); decoding costs some 10 to 16 times the
	// input before any other limit can refuse it.
	MaxBytes int
	// MaxEntries caps the entries of one dump; a dump with more is refused
	// (default 20,000: 10 times torch's default ring buffer).
	MaxEntries int
	// MaxFramesPerEntry caps the Python frames kept per entry; the rest are
	// dropped with a WarnTruncatedFrames warning (default 64). Spans and
	// the analysis do not use frames.
	MaxFramesPerEntry int
	// MaxRanksPerGroup caps the members of one process group; a ranks
	// value with more is left empty with a WarnUnparsableRanks warning
	// (default 1<<20; the largest jobs have some 100,000 ranks).
	MaxRanksPerGroup int
	// Pickle holds the pickle decoder's other limits, among them the
	// output budget that charges each memo reference in full
	// (pickle.Options.MaxOutputBytes); its MaxInputBytes is replaced by
	// MaxBytes.
	Pickle pickle.Options
}

// Defaults of Options.
const (
	DefaultMaxPickleBytes    = 8 << 20
	DefaultMaxJSONBytes      = 12 << 20
	DefaultMaxEntries        = 20000
	DefaultMaxFramesPerEntry = 64
	DefaultMaxRanksPerGroup  = 1 << 20
)

func (o Options) withDefaults() Options {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	o.MaxBytes = max(o.MaxBytes, 0) // 0: the default of the dump's form
	def(&o.MaxEntries, DefaultMaxEntries)
	def(&o.MaxFramesPerEntry, DefaultMaxFramesPerEntry)
	def(&o.MaxRanksPerGroup, DefaultMaxRanksPerGroup)
	return o
}

// ErrUnknownFormat: the input starts with neither a pickle PROTO opcode
// (0x80) nor, after white space, a JSON object.
var ErrUnknownFormat = errors.New("frdump: not a flight recorder dump: neither pickle (first byte 0x80) nor a JSON object")

// ErrTooLarge: the input is over Options.MaxBytes.
var ErrTooLarge = errors.New("frdump: dump over the size limit")

// ErrLimit: the dump is within MaxBytes but over MaxEntries, or its mapped
// form would be over the output budget (pickle.OutputBudget of its size).
// The pickle decoder's own limits, its output budget among them, are
// pickle.ErrLimit.
var ErrLimit = errors.New("frdump: dump over a limit")

// FieldError is a dump value of the wrong type.
type FieldError struct {
	// Path locates the value, e.g. "entries[12].time_created_ns".
	Path string
	// Want and Got describe the expected and the actual type.
	Want, Got string
}

func (e *FieldError) Error() string {
	return "frdump: " + e.Path + ": want " + e.Want + ", got " + e.Got
}

// WarningKind classifies a Warning.
type WarningKind string

// Kinds of warnings.
const (
	// WarnUnknownVersion: the version is outside Oldest..Newest or is not
	// major.minor; the fields this package knows were parsed.
	WarnUnknownVersion WarningKind = "unknown_version"
	// WarnMissingFields: fields the dump's version should have are absent;
	// they were left at their zero values.
	WarnMissingFields WarningKind = "missing_fields"
	// WarnUnknownFields: fields this package does not know were ignored.
	WarnUnknownFields WarningKind = "unknown_fields"
	// WarnUnparsableRanks: a pg_config ranks value is not a list of ranks,
	// or has more than Options.MaxRanksPerGroup; PGConfig.Ranks is nil.
	WarnUnparsableRanks WarningKind = "unparsable_ranks"
	// WarnTruncatedFrames: entries had more than Options.MaxFramesPerEntry
	// frames; the first ones were kept.
	WarnTruncatedFrames WarningKind = "truncated_frames"
)

// Warning is a problem with a dump that did not stop the parse. Parse
// reports each kind at most once per dump.
type Warning struct {
	Kind WarningKind
	// Fields names what the warning is about, sorted: "pg_status",
	// "entries[].thread_id", `pg_config["0"].ranks`.
	Fields  []string
	Message string
}

func (w Warning) String() string { return w.Message }

// Parse decodes one dump in either form with the default Options.
func Parse(data []byte) (*Dump, []Warning, error) {
	return ParseWithOptions(data, Options{})
}

// ParseWithOptions decodes one dump, pickle (first byte 0x80, what torch
// writes to disk) or JSON (a '{' after optional white space, what the
// dump_nccl_trace_json handler returns), into a Dump. It never panics.
//
// A version outside Oldest..Newest, missing fields, unknown fields and
// unparsable ranks are Warnings, not errors. The errors: ErrUnknownFormat,
// ErrTooLarge, a decoding error (*pickle.Error or encoding/json's), or a
// *FieldError for a value of the wrong type.
func ParseWithOptions(data []byte, opts Options) (*Dump, []Warning, error) {
	opts = opts.withDefaults()
	tooLarge := func(limit int) error {
		return fmt.Errorf("%w: %d bytes, limit %d (MaxBytes)", ErrTooLarge, len(data), limit)
	}
	if len(data) > 0 && data[0] == 0x80 {
		opts.MaxBytes = cmp.Or(opts.MaxBytes, DefaultMaxPickleBytes)
		if len(data) > opts.MaxBytes {
			return nil, nil, tooLarge(opts.MaxBytes)
		}
		return parsePickle(data, opts)
	}
	if limit := cmp.Or(opts.MaxBytes, DefaultMaxJSONBytes); len(data) > limit {
		return nil, nil, tooLarge(limit)
	}
	data = bytes.TrimLeft(bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")), " \t\r\n")
	if len(data) > 0 && data[0] == '{' {
		return parseJSON(data, opts)
	}
	return nil, nil, ErrUnknownFormat
}

// The two forms decode to generic values (see parse_pickle.go and
// parse_json.go); everything below maps those onto Dump, once, for both:
//
//	pickle            JSON               used for
//	*pickle.Dict      map[string]any     dicts
//	[]any, Tuple      []any              lists, process_group
//	int64             json.Number        integers
//	float64, int64    json.Number        duration_ms
//	string, bool, nil string, bool, nil

// entry fields, as bits of a mask.
const (
	fRecordID = iota
	fPGID
	fProcessGroup
	fCollectiveSeqID
	fP2PSeqID
	fOpID
	fProfilingName
	fTimeCreated
	fDuration
	fInputSizes
	fInputDtypes
	fOutputSizes
	fOutputDtypes
	fState
	fDiscoveredStarted
	fDiscoveredCompleted
	fRetired
	fTimeout
	fIsP2P
	fThreadName
	fThreadID
	fFrames
	numEntryFields
)

var entryFieldNames = [numEntryFields]string{
	"record_id", "pg_id", "process_group", "collective_seq_id", "p2p_seq_id", "op_id",
	"profiling_name", "time_created_ns", "duration_ms", "input_sizes", "input_dtypes",
	"output_sizes", "output_dtypes", "state", "time_discovered_started_ns",
	"time_discovered_completed_ns", "retired", "timeout_ms", "is_p2p", "thread_name",
	"thread_id", "frames",
}

// requiredEntryFields are the fields every entry of version v must have.
// duration_ms (only with TORCH_NCCL_ENABLE_TIMING=1) and frames (pickle
// only, and only with stack traces) are always optional; thread_name and
// thread_id came with 2.10.
func requiredEntryFields(v Version) uint32 {
	const optional = 1<<fDuration | 1<<fFrames | 1<<fThreadName | 1<<fThreadID
	req := uint32(1<<numEntryFields-1) &^ optional
	if !v.Less(Version{Major: 2, Minor: 10}) {
		req |= 1<<fThreadName | 1<<fThreadID
	}
	return req
}

// parser maps one decoded dump and collects its warnings.
type parser struct {
	opts Options
	// budget is what the mapped Dump may take, in bytes: the pickle
	// decoder's output budget for the same input (pickle.OutputBudget), so
	// that a dump costs at most a constant multiple of its size. used is
	// what it took so far; overErr is set once used passes budget.
	budget, used int64
	overErr      error
	dump         Dump
	versionSeen  bool
	missingTop   []string
	missingEntry [numEntryFields]int // entries lacking each field
	unknown      map[string]struct{}
	badRanks     []string
	// Backing stores of Entry slices: a 2,000-entry dump would otherwise
	// make some 50,000 small allocations.
	sizesArena    []int64
	sizeListArena [][]int64
	frameArena    []Frame
	stringArena   []string
	frameCache    map[*pickle.Dict]Frame
	// rankCache holds each distinct ranks string parsed once: groups that
	// share one (through the memo, or by value) share its []int.
	rankCache       map[string]parsedRanks
	truncatedFrames int // entries whose frames were cut to MaxFramesPerEntry
}

type parsedRanks struct {
	ranks []int
	ok    bool
}

// mapDump maps a decoded dump of n input bytes; opts must have its
// defaults set.
func mapDump(top any, n int, opts Options) (*Dump, []Warning, error) {
	p := &parser{opts: opts, budget: pickle.OutputBudget(n, opts.Pickle)}
	err := p.top(top)
	if p.overErr != nil {
		err = p.overErr
	}
	if err != nil {
		return nil, nil, err
	}
	return &p.dump, p.warnings(), nil
}

// Sizes of what the mapper allocates, charged against parser.budget.
const (
	entryBytes  = int64(unsafe.Sizeof(Entry{}))
	frameBytes  = int64(unsafe.Sizeof(Frame{}))
	sliceBytes  = int64(unsafe.Sizeof([]int64(nil)))
	stringBytes = int64(unsafe.Sizeof(""))
	intBytes    = int64(unsafe.Sizeof(int(0)))
	int64Bytes  = 8
)

// charge accounts for n items of size bytes each, reporting false (and
// setting overErr) once the dump is over the output budget.
func (p *parser) charge(n int, size int64, what string) bool {
	if p.overErr != nil {
		return false
	}
	p.used += int64(n) * size
	if p.used > p.budget {
		p.overErr = fmt.Errorf("%w: %s: the mapped dump needs more than its %d-byte output budget (the smaller of pickle.Options.MaxOutputBytes %d and OutputBytesPerInputByte %d x its size + %d)",
			ErrLimit, what, p.budget, p.opts.Pickle.MaxOutputBytes, p.opts.Pickle.OutputBytesPerInputByte, pickle.DefaultOutputSlackBytes)
		return false
	}
	return true
}

func (p *parser) top(v any) error {
	fields, err := fieldsOf(v, func() string { return "(top level)" })
	if err != nil {
		return err
	}
	var seenConfig, seenStatus bool
	for _, f := range fields {
		key, val := f.Key.(string), f.Value
		switch key {
		case "version":
			p.versionSeen = true
			err = p.version(val)
		case "pg_config":
			seenConfig = true
			err = p.pgConfig(val)
		case "pg_status":
			seenStatus = true
			err = p.pgStatus(val)
		case "entries":
			err = p.entries(val)
		case "nccl_version", "comm_lib_version":
			s, ok := val.(string)
			if !ok {
				return &FieldError{Path: key, Want: "a string", Got: describe(val)}
			}
			p.dump.CommLibVersion = s
		case "nccl_comm_state":
			// Per-communicator NCCL state: not part of Dump.
		default:
			p.addUnknown(key)
		}
		if err != nil {
			return err
		}
	}
	if !p.versionSeen {
		p.missingTop = append(p.missingTop, "version")
	}
	if !seenConfig {
		p.missingTop = append(p.missingTop, "pg_config")
	}
	if !seenStatus {
		p.missingTop = append(p.missingTop, "pg_status")
	}
	return nil
}

func (p *parser) version(val any) error {
	s, ok := val.(string)
	if !ok {
		return &FieldError{Path: "version", Want: "a string", Got: describe(val)}
	}
	v, err := ParseVersion(s)
	if err != nil {
		v = Version{Raw: s}
	}
	p.dump.Version = v
	return nil
}

func (p *parser) pgConfig(val any) error {
	if val == nil {
		return nil
	}
	groups, err := fieldsOf(val, func() string { return "pg_config" })
	if err != nil {
		return err
	}
	for _, g := range groups {
		name := g.Key.(string)
		path := func() string { return "pg_config[" + strconv.Quote(name) + "]" }
		fields, err := fieldsOf(g.Value, path)
		if err != nil {
			return err
		}
		cfg := PGConfig{Name: name} // torch keys pg_config by the group's name
		var seenName, seenDesc, seenRanks bool
		for _, f := range fields {
			key, v := f.Key.(string), f.Value
			switch key {
			case "name", "desc":
				s, ok := v.(string)
				if !ok {
					return &FieldError{Path: path() + "." + key, Want: "a string", Got: describe(v)}
				}
				if key == "name" {
					cfg.Name, seenName = s, true
				} else {
					cfg.Desc, seenDesc = s, true
				}
			case "ranks":
				seenRanks = true
				ranks, ok := p.ranks(v)
				if !ok {
					p.badRanks = append(p.badRanks, path()+".ranks")
				}
				cfg.Ranks = ranks
			default:
				p.addUnknown("pg_config[]." + key)
			}
		}
		p.noteMissing("pg_config[].name", seenName)
		p.noteMissing("pg_config[].desc", seenDesc)
		p.noteMissing("pg_config[].ranks", seenRanks)
		if p.dump.PGConfig == nil {
			p.dump.PGConfig = map[string]PGConfig{}
		}
		p.dump.PGConfig[name] = cfg
	}
	return nil
}

// ranks parses a ranks value, each distinct string once. Groups that share
// a string share the result: treat PGConfig.Ranks as read-only.
func (p *parser) ranks(v any) ([]int, bool) {
	s, isString := v.(string)
	if !isString {
		ranks, ok := parseRanks(v, p.opts.MaxRanksPerGroup)
		if !p.charge(len(ranks), intBytes, "pg_config ranks") {
			return nil, false
		}
		return ranks, ok
	}
	if r, ok := p.rankCache[s]; ok {
		return r.ranks, r.ok
	}
	ranks, ok := parseRanks(s, p.opts.MaxRanksPerGroup)
	if !p.charge(len(ranks)+len(s), intBytes, "pg_config ranks") {
		return nil, false
	}
	if p.rankCache == nil {
		p.rankCache = map[string]parsedRanks{}
	}
	p.rankCache[s] = parsedRanks{ranks, ok}
	return ranks, ok
}

// parseRanks reads torch's "[0, 1, 2]" (or "[0,1,2]" from torchcomms), or
// a list of integers, of at most maxRanks members (a guard against a
// crafted ranks value).
func parseRanks(v any, maxRanks int) ([]int, bool) {
	switch x := v.(type) {
	case string:
		s := strings.TrimSpace(x)
		if len(s) < 2 || s[0] != '[' || s[len(s)-1] != ']' {
			return nil, false
		}
		s = strings.TrimSpace(s[1 : len(s)-1])
		if s == "" {
			return []int{}, true
		}
		n := strings.Count(s, ",") + 1
		if n > maxRanks {
			return nil, false
		}
		ranks := make([]int, 0, n)
		for field := range strings.SplitSeq(s, ",") {
			r, err := strconv.Atoi(strings.TrimSpace(field))
			if err != nil || r < 0 {
				return nil, false
			}
			ranks = append(ranks, r)
		}
		return ranks, true
	case []any, pickle.Tuple:
		items, _ := asList(x)
		if len(items) > maxRanks {
			return nil, false
		}
		ranks := make([]int, 0, len(items))
		for _, it := range items {
			r, ok := asInt(it)
			if !ok || r < 0 || int64(int(r)) != r {
				return nil, false
			}
			ranks = append(ranks, int(r))
		}
		return ranks, true
	}
	return nil, false
}

func (p *parser) pgStatus(val any) error {
	if val == nil {
		return nil
	}
	groups, err := fieldsOf(val, func() string { return "pg_status" })
	if err != nil {
		return err
	}
	for _, g := range groups {
		id := g.Key.(string)
		path := func() string { return "pg_status[" + strconv.Quote(id) + "]" }
		fields, err := fieldsOf(g.Value, path)
		if err != nil {
			return err
		}
		st := PGStatus{LastEnqueued: -1, LastStarted: -1, LastCompleted: -1}
		var seen [3]bool
		for _, f := range fields {
			key, v := f.Key.(string), f.Value
			var dst *int64
			var i int
			switch key {
			case "last_enqueued_collective":
				dst, i = &st.LastEnqueued, 0
			case "last_started_collective":
				dst, i = &st.LastStarted, 1
			case "last_completed_collective":
				dst, i = &st.LastCompleted, 2
			default:
				p.addUnknown("pg_status[]." + key)
				continue
			}
			// Integers in pickle, decimal strings in JSON.
			n, ok := asInt(v)
			if s, isStr := v.(string); isStr {
				var err error
				n, err = strconv.ParseInt(strings.TrimSpace(s), 10, 64)
				ok = err == nil
			}
			if !ok {
				return &FieldError{Path: path() + "." + key, Want: "an integer", Got: describe(v)}
			}
			*dst, seen[i] = n, true
		}
		p.noteMissing("pg_status[].last_enqueued_collective", seen[0])
		p.noteMissing("pg_status[].last_started_collective", seen[1])
		p.noteMissing("pg_status[].last_completed_collective", seen[2])
		if p.dump.PGStatus == nil {
			p.dump.PGStatus = map[string]PGStatus{}
		}
		p.dump.PGStatus[id] = st
	}
	return nil
}

func (p *parser) entries(val any) error {
	if val == nil {
		return nil
	}
	list, ok := val.([]any)
	if !ok {
		return &FieldError{Path: "entries", Want: "a list", Got: describe(val)}
	}
	if len(list) > p.opts.MaxEntries {
		return fmt.Errorf("%w: entries: %d entries, limit %d (MaxEntries)", ErrLimit, len(list), p.opts.MaxEntries)
	}
	if !p.charge(len(list), entryBytes, "entries") {
		return p.overErr
	}
	p.dump.Entries = make([]Entry, len(list))
	for i, ev := range list {
		if err := p.entry(i, ev, &p.dump.Entries[i]); err != nil {
			return err
		}
		if p.overErr != nil {
			return p.overErr
		}
	}
	return nil
}

func (p *parser) entry(idx int, v any, e *Entry) error {
	fields, err := fieldsOf(v, func() string { return entryPath(idx, "") })
	if err != nil {
		return err
	}
	var seen uint32
	for _, field := range fields {
		key, val := field.Key.(string), field.Value
		var ok bool
		var want string
		var f int
		switch key {
		case "record_id":
			f, want = fRecordID, "an integer"
			e.RecordID, ok = asInt(val)
		case "pg_id":
			f, want = fPGID, "an integer"
			e.PGID, ok = asInt(val)
		case "process_group":
			f, want = fProcessGroup, "a (name, desc) pair of strings"
			pg, _ := asList(val)
			if len(pg) == 2 {
				var ok1, ok2 bool
				e.PGName, ok1 = pg[0].(string)
				e.PGDesc, ok2 = pg[1].(string)
				ok = ok1 && ok2
			}
		case "collective_seq_id":
			f, want = fCollectiveSeqID, "an integer"
			e.CollectiveSeqID, ok = asInt(val)
		case "p2p_seq_id":
			f, want = fP2PSeqID, "an integer"
			e.P2PSeqID, ok = asInt(val)
		case "op_id":
			f, want = fOpID, "an integer"
			e.OpID, ok = asInt(val)
		case "profiling_name":
			f, want = fProfilingName, "a string"
			e.ProfilingName, ok = val.(string)
		case "time_created_ns":
			f, want = fTimeCreated, "an integer"
			e.TimeCreatedNs, ok = asInt(val)
		case "duration_ms":
			f, want = fDuration, "a number"
			if val == nil {
				ok = true
			} else {
				e.DurationMs, ok = asFloat(val)
				e.HasDuration = ok
			}
		case "input_sizes":
			f, want = fInputSizes, "a list of lists of integers"
			e.InputSizes, ok = p.sizes(val)
		case "output_sizes":
			f, want = fOutputSizes, "a list of lists of integers"
			e.OutputSizes, ok = p.sizes(val)
		case "input_dtypes":
			f, want = fInputDtypes, "a list of strings"
			e.InputDtypes, ok = p.strings(val)
		case "output_dtypes":
			f, want = fOutputDtypes, "a list of strings"
			e.OutputDtypes, ok = p.strings(val)
		case "state":
			f, want = fState, "a string"
			e.State, ok = val.(string)
		case "time_discovered_started_ns":
			f, want = fDiscoveredStarted, "an integer or None"
			e.TimeDiscoveredStartedNs, ok = asTime(val)
		case "time_discovered_completed_ns":
			f, want = fDiscoveredCompleted, "an integer or None"
			e.TimeDiscoveredCompletedNs, ok = asTime(val)
		case "retired":
			f, want = fRetired, "a bool"
			e.Retired, ok = val.(bool)
		case "timeout_ms":
			f, want = fTimeout, "an integer"
			e.TimeoutMs, ok = asInt(val)
		case "is_p2p":
			f, want = fIsP2P, "a bool"
			e.IsP2P, ok = val.(bool)
		case "thread_name":
			f, want = fThreadName, "a string"
			e.ThreadName, ok = val.(string)
		case "thread_id":
			f, want = fThreadID, "a string"
			e.ThreadID, ok = asIDString(val)
		case "frames":
			f = fFrames
			if e.Frames, err = p.frames(idx, val); err != nil {
				return err
			}
			ok = true
		default:
			p.addUnknown("entries[]." + key)
			continue
		}
		if !ok {
			return &FieldError{Path: entryPath(idx, key), Want: want, Got: describe(val)}
		}
		seen |= 1 << f
	}
	for missing := ^seen & (1<<numEntryFields - 1); missing != 0; missing &= missing - 1 {
		p.missingEntry[bits.TrailingZeros32(missing)]++
	}
	return nil
}

func (p *parser) frames(idx int, val any) ([]Frame, error) {
	if val == nil {
		return nil, nil
	}
	items, ok := val.([]any)
	if !ok {
		return nil, &FieldError{Path: entryPath(idx, "frames"), Want: "a list", Got: describe(val)}
	}
	if len(items) > p.opts.MaxFramesPerEntry {
		items = items[:p.opts.MaxFramesPerEntry]
		p.truncatedFrames++
	}
	if !p.charge(len(items), frameBytes, "entries[].frames") {
		return nil, p.overErr
	}
	if len(p.frameArena) < len(items) {
		p.frameArena = make([]Frame, max(1024, len(items)))
	}
	frames := p.frameArena[:len(items):len(items)]
	p.frameArena = p.frameArena[len(items):]
	for i, fv := range items {
		// torch shares each distinct frame dict among all the entries
		// that show it: convert each once.
		d, shared := fv.(*pickle.Dict)
		if shared {
			if f, ok := p.frameCache[d]; ok {
				frames[i] = f
				continue
			}
		}
		path := func() string { return entryPath(idx, "frames") + "[" + strconv.Itoa(i) + "]" }
		fields, err := fieldsOf(fv, path)
		if err != nil {
			return nil, err
		}
		fr := &frames[i]
		for _, field := range fields {
			key, v := field.Key.(string), field.Value
			ok := true
			var want string
			switch key {
			case "name":
				want = "a string"
				fr.Name, ok = v.(string)
			case "filename":
				want = "a string"
				fr.Filename, ok = v.(string)
			case "line":
				want = "an integer"
				fr.Line, ok = asInt(v)
			default:
				p.addUnknown("entries[].frames[]." + key)
			}
			if !ok {
				return nil, &FieldError{Path: path() + "." + key, Want: want, Got: describe(v)}
			}
		}
		if shared {
			if p.frameCache == nil {
				p.frameCache = map[*pickle.Dict]Frame{}
			}
			p.frameCache[d] = *fr
		}
	}
	return frames, nil
}

// sizes reads input_sizes/output_sizes: one list of dimensions per tensor.
func (p *parser) sizes(val any) ([][]int64, bool) {
	outer, ok := val.([]any)
	if !ok || !p.charge(len(outer), sliceBytes, "input_sizes/output_sizes") {
		return nil, false
	}
	if len(p.sizeListArena) < len(outer) {
		p.sizeListArena = make([][]int64, max(256, len(outer)))
	}
	res := p.sizeListArena[:len(outer):len(outer)]
	p.sizeListArena = p.sizeListArena[len(outer):]
	for i, inner := range outer {
		dims, ok := asList(inner)
		if !ok || !p.charge(len(dims), int64Bytes, "input_sizes/output_sizes") {
			return nil, false
		}
		if len(p.sizesArena) < len(dims) {
			p.sizesArena = make([]int64, max(1024, len(dims)))
		}
		row := p.sizesArena[:len(dims):len(dims)]
		p.sizesArena = p.sizesArena[len(dims):]
		for j, d := range dims {
			if row[j], ok = asInt(d); !ok {
				return nil, false
			}
		}
		res[i] = row
	}
	return res, true
}

func (p *parser) addUnknown(field string) {
	if p.unknown == nil {
		p.unknown = map[string]struct{}{}
	}
	p.unknown[field] = struct{}{}
}

func (p *parser) noteMissing(field string, seen bool) {
	if !seen && !slices.Contains(p.missingTop, field) {
		p.missingTop = append(p.missingTop, field)
	}
}

func (p *parser) warnings() []Warning {
	var ws []Warning
	v := p.dump.Version
	if p.versionSeen && (v.Less(Oldest) || Newest.Less(v)) {
		ws = append(ws, Warning{
			Kind:    WarnUnknownVersion,
			Fields:  []string{"version"},
			Message: fmt.Sprintf("frdump: version %q is not one of the known %s to %s: parsed the fields this version of the receiver knows", v.Raw, Oldest, Newest),
		})
	}

	missing := slices.Clone(p.missingTop)
	var details []string
	req := requiredEntryFields(v)
	for f := range numEntryFields {
		if n := p.missingEntry[f]; n > 0 && req&(1<<f) != 0 {
			name := "entries[]." + entryFieldNames[f]
			missing = append(missing, name)
			details = append(details, fmt.Sprintf("%s (in %d of %d entries)", name, n, len(p.dump.Entries)))
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		slices.Sort(details)
		all := slices.DeleteFunc(slices.Clone(missing), func(s string) bool { return strings.HasPrefix(s, "entries[].") })
		all = append(all, details...)
		ws = append(ws, Warning{
			Kind:    WarnMissingFields,
			Fields:  missing,
			Message: fmt.Sprintf("frdump: version %s dump lacks fields, left at zero values: %s", versionText(v), strings.Join(all, ", ")),
		})
	}

	if len(p.unknown) > 0 {
		fields := make([]string, 0, len(p.unknown))
		for f := range p.unknown {
			fields = append(fields, f)
		}
		slices.Sort(fields)
		ws = append(ws, Warning{
			Kind:    WarnUnknownFields,
			Fields:  fields,
			Message: fmt.Sprintf("frdump: version %s dump has fields this receiver does not know, ignored: %s", versionText(v), strings.Join(fields, ", ")),
		})
	}

	if len(p.badRanks) > 0 {
		slices.Sort(p.badRanks)
		ws = append(ws, Warning{
			Kind:    WarnUnparsableRanks,
			Fields:  p.badRanks,
			Message: fmt.Sprintf("frdump: ranks are not a list of at most %d ranks, left empty: %s", p.opts.MaxRanksPerGroup, strings.Join(p.badRanks, ", ")),
		})
	}

	if p.truncatedFrames > 0 {
		ws = append(ws, Warning{
			Kind:    WarnTruncatedFrames,
			Fields:  []string{"entries[].frames"},
			Message: fmt.Sprintf("frdump: %d of %d entries have more than %d frames (MaxFramesPerEntry), kept the first %d", p.truncatedFrames, len(p.dump.Entries), p.opts.MaxFramesPerEntry, p.opts.MaxFramesPerEntry),
		})
	}
	return ws
}

func versionText(v Version) string {
	if v.Raw == "" {
		return "(none)"
	}
	return strconv.Quote(v.Raw)
}

func entryPath(idx int, key string) string {
	p := "entries[" + strconv.Itoa(idx) + "]"
	if key != "" {
		p += "." + key
	}
	return p
}

// fieldsOf returns the items of a dict of either form, all with string keys:
// a pickled dict's in their order, a JSON object's sorted by key. path names
// the dict in errors; it is called only on error.
func fieldsOf(v any, path func() string) ([]pickle.DictItem, error) {
	switch m := v.(type) {
	case *pickle.Dict:
		for _, it := range m.Items {
			if _, ok := it.Key.(string); !ok {
				return nil, &FieldError{Path: path(), Want: "string keys", Got: describe(it.Key) + " key"}
			}
		}
		return m.Items, nil
	case map[string]any:
		fields := make([]pickle.DictItem, 0, len(m))
		for key, val := range m {
			fields = append(fields, pickle.DictItem{Key: key, Value: val})
		}
		slices.SortFunc(fields, func(a, b pickle.DictItem) int { return strings.Compare(a.Key.(string), b.Key.(string)) })
		return fields, nil
	}
	return nil, &FieldError{Path: path(), Want: "a dict", Got: describe(v)}
}

// asList accepts a list (either form) or a pickled tuple.
func asList(v any) ([]any, bool) {
	switch x := v.(type) {
	case []any:
		return x, true
	case pickle.Tuple:
		return x, true
	}
	return nil, false
}

func asInt(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case json.Number:
		n, err := strconv.ParseInt(string(x), 10, 64)
		return n, err == nil
	}
	return 0, false
}

func asFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int64:
		return float64(x), true
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		return f, err == nil
	}
	return 0, false
}

// asTime reads a watchdog time: None in pickle (0 in JSON) when unknown.
func asTime(v any) (int64, bool) {
	if v == nil {
		return 0, true
	}
	return asInt(v)
}

// asIDString reads thread_id: a string in torch's dumps, tolerated as an
// integer.
func asIDString(v any) (string, bool) {
	if s, ok := v.(string); ok {
		return s, true
	}
	if n, ok := asInt(v); ok {
		return strconv.FormatInt(n, 10), true
	}
	return "", false
}

func (p *parser) strings(v any) ([]string, bool) {
	items, ok := asList(v)
	if !ok || !p.charge(len(items), stringBytes, "input_dtypes/output_dtypes") {
		return nil, false
	}
	if len(p.stringArena) < len(items) {
		p.stringArena = make([]string, max(1024, len(items)))
	}
	out := p.stringArena[:len(items):len(items)]
	p.stringArena = p.stringArena[len(items):]
	for i, it := range items {
		if out[i], ok = it.(string); !ok {
			return nil, false
		}
	}
	return out, true
}

// describe names a decoded value's type for errors.
func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "None/null"
	case *pickle.Dict, map[string]any:
		return "a dict"
	case []any:
		return "a list"
	case pickle.Tuple:
		return "a tuple"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case json.Number:
		if _, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return "an integer"
		}
		return "a float"
	case string:
		return "a string"
	case bool:
		return "a bool"
	case []byte:
		return "bytes"
	}
	return fmt.Sprintf("%T", v)
}
