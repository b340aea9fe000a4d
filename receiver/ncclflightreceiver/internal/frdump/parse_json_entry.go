package frdump // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"

import (
	"math"
	"math/bits"
	"strconv"
)

// The fast path of a JSON entry: an entry of the shape torch writes is
// mapped straight from the input, without the generic values (a map of 21
// keys, a json.Number and an interface per value, the keys sorted) that
// p.entry maps. Any other entry — a key repeated, a value of another type,
// frames that are not empty, an error, over a limit — is left to the
// generic path, which decides as it always did: the fast path changes no
// result (TestJSONParserMatchesOracle), it only skips work.

// jsonEntry is an entry read by jsonEntryFast and not yet committed: its
// scalar fields in e, its lists in slices reused from entry to entry.
type jsonEntry struct {
	e                   Entry
	seen                uint32 // entry fields, as bits (fRecordID...)
	inRows, outRows     []int  // input_sizes, output_sizes: each tensor's dimensions
	inDims, outDims     []int64
	inDtypes, outDtypes []string
	framesList          bool // frames is [] rather than null
}

func (f *jsonEntry) reset() {
	f.e = Entry{}
	f.seen = 0
	f.inRows, f.outRows = f.inRows[:0], f.outRows[:0]
	f.inDims, f.outDims = f.inDims[:0], f.outDims[:0]
	f.inDtypes, f.outDtypes = f.inDtypes[:0], f.outDtypes[:0]
	f.framesList = false
}

// jsonEntryFast reads the entry at s.off into s.entry if it is an object
// of distinct keys whose known fields each hold what p.entry wants of them
// (frames: null or empty), within MaxTreeBytes as jsonValue counts it. It
// reports false, with s.off anywhere, for any other value: the caller then
// decodes it with jsonValue and maps it with p.entry, which fails or maps
// it as it did before the fast path. It records the entry's unknown keys,
// as p.entry does.
func (p *parser) jsonEntryFast(s *jsonScanner) bool {
	f := &s.entry
	f.reset()
	s.held = 0
	if s.peek() != '{' {
		return false
	}
	s.off++
	if !s.charge(jsonSlotBytes) {
		return false
	}
	if s.peek() == '}' {
		s.off++
		return true
	}
	for {
		if s.peek() != '"' {
			return false
		}
		kb, err := s.str()
		if err != nil {
			return false
		}
		s.held += jsonMapEntryBytes + int64(len(kb))
		field := entryFieldIndex(kb)
		var unknown string
		if field < 0 {
			unknown = "entries[]." + string(kb) // before the next string replaces kb
		}
		if s.peek() != ':' {
			return false
		}
		s.off++
		switch {
		case field < 0:
			if _, err := s.value(1); err != nil {
				return false
			}
			p.addUnknown(unknown)
		case f.seen&(1<<field) != 0:
			return false // a repeated key: the last wins, in p.entry
		case !s.entryField(f, field):
			return false
		default:
			f.seen |= 1 << field
		}
		switch s.peek() {
		case ',':
			s.off++
		case '}':
			s.off++
			return true
		default:
			return false
		}
	}
}

// entryField reads the value of one known field of the entry as p.entry
// maps it, reporting false where p.entry would refuse it.
func (s *jsonScanner) entryField(f *jsonEntry, field int) bool {
	e := &f.e
	ok := false
	switch field {
	case fRecordID:
		e.RecordID, ok = s.fastInt()
	case fPGID:
		e.PGID, ok = s.fastInt()
	case fCollectiveSeqID:
		e.CollectiveSeqID, ok = s.fastInt()
	case fP2PSeqID:
		e.P2PSeqID, ok = s.fastInt()
	case fOpID:
		e.OpID, ok = s.fastInt()
	case fTimeCreated:
		e.TimeCreatedNs, ok = s.fastInt()
	case fTimeout:
		e.TimeoutMs, ok = s.fastInt()
	case fDiscoveredStarted:
		e.TimeDiscoveredStartedNs, ok = s.fastTime()
	case fDiscoveredCompleted:
		e.TimeDiscoveredCompletedNs, ok = s.fastTime()
	case fProcessGroup:
		e.PGName, e.PGDesc, ok = s.fastPair()
	case fProfilingName:
		e.ProfilingName, ok = s.fastString()
	case fState:
		e.State, ok = s.fastString()
	case fThreadName:
		e.ThreadName, ok = s.fastString()
	case fThreadID: // a string, tolerated as an integer (asIDString)
		if s.peek() == '"' {
			e.ThreadID, ok = s.fastString()
		} else {
			var n int64
			if n, ok = s.fastInt(); ok {
				e.ThreadID = strconv.FormatInt(n, 10)
			}
		}
	case fDuration:
		if s.peek() == 'n' {
			ok = s.fastNull()
		} else {
			e.DurationMs, ok = s.fastFloat()
			e.HasDuration = ok
		}
	case fRetired:
		e.Retired, ok = s.fastBool()
	case fIsP2P:
		e.IsP2P, ok = s.fastBool()
	case fInputSizes:
		ok = s.fastSizes(&f.inRows, &f.inDims)
	case fOutputSizes:
		ok = s.fastSizes(&f.outRows, &f.outDims)
	case fInputDtypes:
		f.inDtypes, ok = s.fastStrings(f.inDtypes)
	case fOutputDtypes:
		f.outDtypes, ok = s.fastStrings(f.outDtypes)
	case fFrames: // null, or empty as in the testbed's dumps; torch's JSON has none
		switch s.peek() {
		case 'n':
			ok = s.fastNull()
		case '[':
			s.off++
			if ok = s.charge(jsonSlotBytes) && s.peek() == ']'; ok {
				s.off++
				f.framesList = true
			}
		}
	}
	return ok
}

// entryFieldIndex is the entry field (fRecordID...) named key, or -1.
func entryFieldIndex(key []byte) int {
	switch string(key) {
	case "record_id":
		return fRecordID
	case "pg_id":
		return fPGID
	case "process_group":
		return fProcessGroup
	case "collective_seq_id":
		return fCollectiveSeqID
	case "p2p_seq_id":
		return fP2PSeqID
	case "op_id":
		return fOpID
	case "profiling_name":
		return fProfilingName
	case "time_created_ns":
		return fTimeCreated
	case "duration_ms":
		return fDuration
	case "input_sizes":
		return fInputSizes
	case "input_dtypes":
		return fInputDtypes
	case "output_sizes":
		return fOutputSizes
	case "output_dtypes":
		return fOutputDtypes
	case "state":
		return fState
	case "time_discovered_started_ns":
		return fDiscoveredStarted
	case "time_discovered_completed_ns":
		return fDiscoveredCompleted
	case "retired":
		return fRetired
	case "timeout_ms":
		return fTimeout
	case "is_p2p":
		return fIsP2P
	case "thread_name":
		return fThreadName
	case "thread_id":
		return fThreadID
	case "frames":
		return fFrames
	}
	return -1
}

// The values of the fast path: each reads one value of its type, charges
// it as jsonValue does, and reports false for another type, an error or
// MaxTreeBytes passed.

func (s *jsonScanner) fastNumber() ([]byte, bool) {
	if c := s.peek(); c != '-' && !isDigit(c) {
		return nil, false
	}
	b, err := s.number()
	return b, err == nil && s.charge(jsonSlotBytes+int64(len(b)))
}

// fastInt reads an integer: asInt of its json.Number.
func (s *jsonScanner) fastInt() (int64, bool) {
	b, ok := s.fastNumber()
	if !ok {
		return 0, false
	}
	return parseJSONInt(b)
}

// parseJSONInt is strconv.ParseInt(string(b), 10, 64) for the text of a
// JSON number, without the string.
func parseJSONInt(b []byte) (int64, bool) {
	digits := b
	if b[0] == '-' {
		digits = b[1:]
	}
	if len(digits) == 0 || len(digits) > 19 { // more would overflow: strconv says so
		n, err := strconv.ParseInt(string(b), 10, 64)
		return n, err == nil
	}
	var u uint64 // 19 digits fit
	for _, c := range digits {
		if !isDigit(c) {
			return 0, false // a fraction or an exponent
		}
		u = u*10 + uint64(c-'0')
	}
	if b[0] == '-' {
		if u > 1<<63 {
			return 0, false
		}
		return int64(-u), true // -u wraps to the negative value, 1<<63 included
	}
	if u > math.MaxInt64 {
		return 0, false
	}
	return int64(u), true
}

// fastFloat reads a number: asFloat of its json.Number.
func (s *jsonScanner) fastFloat() (float64, bool) {
	b, ok := s.fastNumber()
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseFloat(string(b), 64)
	return v, err == nil
}

// fastTime reads an integer or null (asTime).
func (s *jsonScanner) fastTime() (int64, bool) {
	if s.peek() == 'n' {
		return 0, s.fastNull()
	}
	return s.fastInt()
}

func (s *jsonScanner) fastNull() bool {
	return s.peek() == 'n' && s.literal("null") == nil && s.charge(jsonSlotBytes)
}

func (s *jsonScanner) fastBool() (v, ok bool) {
	switch s.peek() {
	case 't':
		v, ok = true, s.literal("true") == nil
	case 'f':
		ok = s.literal("false") == nil
	}
	return v, ok && s.charge(jsonSlotBytes)
}

func (s *jsonScanner) fastString() (string, bool) {
	if s.peek() != '"' {
		return "", false
	}
	b, err := s.str()
	if err != nil || !s.charge(jsonSlotBytes+int64(len(b))) {
		return "", false
	}
	return s.intern(b), true
}

// fastOpen reads the '[' of a list.
func (s *jsonScanner) fastOpen() bool {
	if s.peek() != '[' {
		return false
	}
	s.off++
	return s.charge(jsonSlotBytes)
}

// fastNext reads what follows a list's item: true after a ',', false
// after the ']' (more false after anything else).
func (s *jsonScanner) fastNext() (next, more bool) {
	switch s.peek() {
	case ',':
		s.off++
		return true, true
	case ']':
		s.off++
		return false, true
	}
	return false, false
}

// fastPair reads process_group: a list of two strings.
func (s *jsonScanner) fastPair() (a, b string, ok bool) {
	if !s.fastOpen() {
		return "", "", false
	}
	if a, ok = s.fastString(); !ok {
		return "", "", false
	}
	if next, more := s.fastNext(); !next || !more {
		return "", "", false
	}
	if b, ok = s.fastString(); !ok {
		return "", "", false
	}
	if next, more := s.fastNext(); next || !more {
		return "", "", false
	}
	return a, b, true
}

// fastStrings appends a list of strings to dst.
func (s *jsonScanner) fastStrings(dst []string) ([]string, bool) {
	if !s.fastOpen() {
		return dst, false
	}
	if s.peek() == ']' {
		s.off++
		return dst, true
	}
	for {
		v, ok := s.fastString()
		if !ok {
			return dst, false
		}
		dst = append(dst, v)
		if next, more := s.fastNext(); !more {
			return dst, false
		} else if !next {
			return dst, true
		}
	}
}

// fastSizes appends a list of lists of integers to rows (each list's
// length) and dims (their items).
func (s *jsonScanner) fastSizes(rows *[]int, dims *[]int64) bool {
	if !s.fastOpen() {
		return false
	}
	if s.peek() == ']' {
		s.off++
		return true
	}
	for {
		if !s.fastOpen() {
			return false
		}
		n := 0
		if s.peek() == ']' {
			s.off++
		} else {
			for {
				d, ok := s.fastInt()
				if !ok {
					return false
				}
				*dims = append(*dims, d)
				n++
				if next, more := s.fastNext(); !more {
					return false
				} else if !next {
					break
				}
			}
		}
		*rows = append(*rows, n)
		if next, more := s.fastNext(); !more {
			return false
		} else if !next {
			return true
		}
	}
}

// fitsFastEntry reports whether the output budget has room for the lists
// of s.entry, which p.entry would charge as it maps them.
func (p *parser) fitsFastEntry(s *jsonScanner) bool {
	f := &s.entry
	need := int64(len(f.inDtypes)+len(f.outDtypes))*stringBytes +
		int64(len(f.inRows)+len(f.outRows))*sliceBytes +
		int64(len(f.inDims)+len(f.outDims))*int64Bytes
	return p.overErr == nil && p.used+need <= p.budget
}

// commitFastEntry maps s.entry onto e, as p.entry maps its generic form:
// the same charges, and the same arena takes in the same order (the keys
// sorted), so that even which empty lists are nil is the same.
func (p *parser) commitFastEntry(s *jsonScanner, e *Entry) {
	f := &s.entry
	*e = f.e
	if f.framesList {
		p.charge(0, frameBytes, "entries[].frames")
		e.Frames = p.frameArena.take(0)
	}
	if f.seen&(1<<fInputDtypes) != 0 {
		e.InputDtypes = p.commitStrings(f.inDtypes)
	}
	if f.seen&(1<<fInputSizes) != 0 {
		e.InputSizes = p.commitSizes(f.inRows, f.inDims)
	}
	if f.seen&(1<<fOutputDtypes) != 0 {
		e.OutputDtypes = p.commitStrings(f.outDtypes)
	}
	if f.seen&(1<<fOutputSizes) != 0 {
		e.OutputSizes = p.commitSizes(f.outRows, f.outDims)
	}
	for missing := ^f.seen & (1<<numEntryFields - 1); missing != 0; missing &= missing - 1 {
		p.missingEntry[bits.TrailingZeros32(missing)]++
	}
}

func (p *parser) commitStrings(items []string) []string {
	p.charge(len(items), stringBytes, "input_dtypes/output_dtypes")
	out := p.stringArena.take(len(items))
	copy(out, items)
	return out
}

func (p *parser) commitSizes(rows []int, dims []int64) [][]int64 {
	p.charge(len(rows), sliceBytes, "input_sizes/output_sizes")
	res := p.sizeListArena.take(len(rows))
	for i, n := range rows {
		p.charge(n, int64Bytes, "input_sizes/output_sizes")
		res[i] = p.sizeArena.take(n)
		copy(res[i], dims[:n])
		dims = dims[n:]
	}
	return res
}
