package frdump // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
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
	// (pickle.Options.MaxOutputBytes) and the cap on the decoded tree
	// (pickle.Options.MaxTreeBytes); its MaxInputBytes is replaced by
	// MaxBytes.
	Pickle pickle.Options
	// MaxTreeBytes, when positive, caps what decoding holds at once, in
	// estimated bytes: a pickle's decoded tree (pickle.Options.MaxTreeBytes,
	// which it replaces), or the decoded value of one JSON entry or
	// top-level field (JSON is read one of them at a time). A caller that
	// shares one memory budget among dumps gives each its share here. Over
	// it: an error that errors.Is pickle.ErrTreeLimit (and ErrLimit).
	// Default 0: no cap.
	MaxTreeBytes int64
	// Entry, when set, receives each entry as soon as it is mapped, in
	// dump order, and Dump.Entries stays nil: the entries are never all
	// held at once. i counts from 0; n is the number of entries when it is
	// known before the first (pickle), else -1 (JSON, read as a stream).
	// e and its slices are reused for the next entry: copy what is kept.
	// An error from Entry stops the parse and is returned as it is. Every
	// limit holds as without it: a dump is accepted or refused alike.
	Entry func(i, n int, e *Entry) error
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
// ErrTooLarge, a decoding error (*pickle.Error, or one that says
// "decoding JSON" and the offset), or a *FieldError for a value of the
// wrong type.
func ParseWithOptions(data []byte, opts Options) (*Dump, []Warning, error) {
	return parseWithOptions(data, opts, parseJSON)
}

// parseWithOptions is ParseWithOptions with the JSON decoder given: its
// tests compare parseJSON with the encoding/json one it replaced.
func parseWithOptions(data []byte, opts Options, parseJSON func([]byte, Options) (*Dump, []Warning, error)) (*Dump, []Warning, error) {
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
	seenTop      map[string]bool
	missingTop   []string
	missingEntry [numEntryFields]int // entries lacking each field
	entryCount   int
	unknown      map[string]struct{}
	badRanks     []string
	// Backing stores of Entry slices: a 2,000-entry dump would otherwise
	// make some 50,000 small allocations. Reset after each entry when
	// Options.Entry streams them.
	cur           Entry // the entry handed to Options.Entry
	sizeArena     arena[int64]
	sizeListArena arena[[]int64]
	frameArena    arena[Frame]
	stringArena   arena[string]
	frameCache    map[*pickle.Dict]Frame
	// rankCache holds each distinct ranks string parsed once: groups that
	// share one (through the memo, or by value) share its []int.
	rankCache       map[string]parsedRanks
	truncatedFrames int // entries whose frames were cut to MaxFramesPerEntry
}

func newParser(n int, opts Options) *parser {
	// Streamed, the arenas hold one entry at a time: a chunk of 64 items
	// (more for an entry that needs more) is reused from entry to entry.
	chunk := 1024
	if opts.Entry != nil {
		chunk = 64
	}
	return &parser{opts: opts, budget: pickle.OutputBudget(n, opts.Pickle),
		sizeArena: arena[int64]{min: chunk}, sizeListArena: arena[[]int64]{min: chunk / 4}, frameArena: arena[Frame]{min: chunk}, stringArena: arena[string]{min: chunk}}
}

type parsedRanks struct {
	ranks []int
	ok    bool
}

// mapDump maps the decoded dump top; p.opts must have its defaults set.
func (p *parser) mapDump(top any) (*Dump, []Warning, error) {
	fields, err := fieldsOf(top, func() string { return "(top level)" })
	if err != nil {
		return nil, nil, err
	}
	for _, f := range fields {
		if err := p.field(f.Key.(string), f.Value); err != nil {
			return nil, nil, err
		}
	}
	return p.result()
}

// seeTop records a top-level key, refusing one seen before.
func (p *parser) seeTop(key string) error {
	if p.seenTop[key] {
		return &FieldError{Path: key, Want: "one value", Got: "the key repeated"}
	}
	if p.seenTop == nil {
		p.seenTop = map[string]bool{}
	}
	p.seenTop[key] = true
	return nil
}

// result ends the mapping: the dump and its warnings, or the error that
// stopped it.
func (p *parser) result() (*Dump, []Warning, error) {
	if p.overErr != nil {
		return nil, nil, p.overErr
	}
	for _, key := range []string{"version", "pg_config", "pg_status"} {
		if !p.seenTop[key] {
			p.missingTop = append(p.missingTop, key)
		}
	}
	d := p.dump
	return &d, p.warnings(), nil
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

// field maps one top-level field; a repeated one is refused (a Python
// dict has none, and two would leave a reader to choose).
func (p *parser) field(key string, val any) error {
	if err := p.seeTop(key); err != nil {
		return err
	}
	var err error
	switch key {
	case "version":
		p.versionSeen = true
		err = p.version(val)
	case "pg_config":
		err = p.pgConfig(val)
	case "pg_status":
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
	if err == nil {
		err = p.overErr
	}
	return err
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

func entryPath(idx int, key string) string {
	p := "entries[" + strconv.Itoa(idx) + "]"
	if key != "" {
		p += "." + key
	}
	return p
}
