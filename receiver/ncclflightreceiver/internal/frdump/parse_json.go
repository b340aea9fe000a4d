package frdump // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"

import (
	"encoding/json"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/pickle"
)

// parseJSON decodes the form torch's dump_nccl_trace_json handler returns.
// It differs from the pickle in ways mapDump absorbs: process_group is a
// list, unknown watchdog times are 0 rather than None, pg_status values are
// decimal strings, there are no frames, and entries is omitted when empty.
// Numbers stay json.Number so that ns timestamps keep all their digits.
//
// The top-level object is read key by key and the entries one at a time:
// the whole document is never decoded at once, so decoding holds one
// entry's values besides the input (and, without Options.Entry, the
// mapped entries), at most Options.MaxTreeBytes of them. An entry of the
// shape torch writes is mapped straight from the input
// (parse_json_entry.go); any other is decoded into generic values first.
// The result is what encoding/json's Decoder read token by token would give
// (TestJSONParserMatchesOracle).
func parseJSON(data []byte, opts Options) (*Dump, []Warning, error) {
	s := &jsonScanner{data: data, off: 1, limit: opts.MaxTreeBytes} // data[0] is '{'
	p := newParser(len(data), opts)
	if err := p.jsonTop(s); err != nil {
		return nil, nil, err
	}
	if s.peek(); s.off < len(data) {
		s.off++ // encoding/json's Decoder says where the first token after it ends
		return nil, nil, s.errorf("data after the top-level object")
	}
	return p.result()
}

// jsonTop maps the top-level object, whose '{' was read.
func (p *parser) jsonTop(s *jsonScanner) error {
	if s.peek() == '}' {
		s.off++
		return nil
	}
	for {
		if s.peek() != '"' {
			return s.unexpected("looking for beginning of object key string")
		}
		kb, err := s.str()
		if err != nil {
			return err
		}
		key := s.intern(kb)
		if s.peek() != ':' {
			return s.unexpected("after object key")
		}
		s.off++
		if key == "entries" {
			err = p.jsonEntries(s)
		} else {
			var v any
			if v, err = p.jsonValue(s); err != nil {
				return err
			}
			err = p.field(key, v)
		}
		if err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.off++
		case '}':
			s.off++
			return nil
		default:
			return s.unexpected("after object key:value pair")
		}
	}
}

// jsonEntries maps the entries list one entry at a time.
func (p *parser) jsonEntries(s *jsonScanner) error {
	if err := p.seeTop("entries"); err != nil {
		return err
	}
	switch c := s.peek(); c {
	case '[':
		s.off++
	case '{':
		return &FieldError{Path: "entries", Want: "a list", Got: "a dict"}
	default:
		start := s.off
		if err := s.scalar(); err != nil {
			return err
		}
		switch c {
		case 'n':
			return nil // null
		case '"':
			return &FieldError{Path: "entries", Want: "a list", Got: "a string"}
		case 't', 'f':
			return &FieldError{Path: "entries", Want: "a list", Got: "a bool"}
		}
		return &FieldError{Path: "entries", Want: "a list", Got: describe(json.Number(s.data[start:s.off]))}
	}
	if s.peek() == ']' {
		s.off++
		return nil
	}
	for i := 0; ; i++ {
		if err := p.jsonEntry(s, i); err != nil {
			return err
		}
		switch s.peek() {
		case ']':
			s.off++
			return nil
		case 0, '}': // the end, or an error the oracle found before counting
		default:
			if i+1 == p.opts.MaxEntries {
				return p.tooManyJSONEntries(s, i+1)
			}
		}
		if s.peek() != ',' {
			return s.unexpected("after array element")
		}
		s.off++
	}
}

// jsonEntry reads and maps entry i, and hands it to Options.Entry when set.
func (p *parser) jsonEntry(s *jsonScanner, i int) error {
	start := s.off
	fast := p.jsonEntryFast(s)
	var v any
	if !fast {
		s.off = start
		var err error
		if v, err = p.jsonValue(s); err != nil {
			return err
		}
	}
	if !p.charge(1, entryBytes, "entries") {
		return p.overErr
	}
	var e *Entry
	if p.opts.Entry != nil {
		p.cur = Entry{}
		e = &p.cur
	} else {
		p.dump.Entries = append(p.dump.Entries, Entry{})
		e = &p.dump.Entries[i]
	}
	var err error
	if fast && p.fitsFastEntry(s) {
		p.commitFastEntry(s, e)
	} else {
		if fast { // over the output budget: mapped generically, to fail as it does
			end := s.off
			s.off = start
			v, _ = p.jsonValue(s) // read once already
			s.off = end
		}
		err = p.entry(i, v, e)
	}
	if p.opts.Entry == nil {
		p.entryCount++
	} else if err == nil {
		var entryErr error
		if err, entryErr = p.handOver(i, -1); err == nil {
			err = entryErr
		}
	}
	if err == nil {
		err = p.overErr
	}
	return err
}

// tooManyJSONEntries counts the entries left, checking but not decoding
// them, to say how many the dump has. n entries were read; a ',' or
// something that is not the end of the list follows.
func (p *parser) tooManyJSONEntries(s *jsonScanner, n int) error {
	for {
		switch c := s.peek(); {
		case c == ',':
			s.off++
		case s.off == len(s.data) || c == ']' || c == '}':
			return tooManyEntries(n, p.opts.MaxEntries)
		default:
			return s.unexpected("after array element")
		}
		if err := s.skip(); err != nil {
			return err
		}
		n++
	}
}

// Estimated bytes of decoded JSON values (Options.MaxTreeBytes): an
// interface slot, a string's bytes, a map entry.
const (
	jsonSlotBytes     = 16
	jsonMapEntryBytes = 48
	maxJSONDepth      = 64
)

// jsonValue decodes one value (a top-level field's, or an entry) into
// generic values — map[string]any, []any, string, json.Number, bool, nil —
// refusing one that holds more than Options.MaxTreeBytes or nests deeper
// than 64.
func (p *parser) jsonValue(s *jsonScanner) (any, error) {
	s.held = 0
	return s.value(0)
}

func (s *jsonScanner) value(depth int) (any, error) {
	var v any
	switch c := s.peek(); {
	case c == '"':
		b, err := s.str()
		if err != nil {
			return nil, err
		}
		s.held += jsonSlotBytes + int64(len(b))
		v = s.intern(b)
	case c == '-' || isDigit(c):
		b, err := s.number()
		if err != nil {
			return nil, err
		}
		s.held += jsonSlotBytes + int64(len(b))
		v = json.Number(s.intern(b))
	case c == 't' || c == 'f' || c == 'n':
		if err := s.scalar(); err != nil {
			return nil, err
		}
		s.held += jsonSlotBytes
		switch c {
		case 't':
			v = true
		case 'f':
			v = false
		}
	case c == '[' || c == '{':
		s.off++
		s.held += jsonSlotBytes
		if err := s.checkHeld(); err != nil {
			return nil, err
		}
		if depth == maxJSONDepth {
			return nil, s.errorf("nesting deeper than %d", maxJSONDepth)
		}
		if c == '[' {
			return s.list(depth)
		}
		return s.object(depth)
	default:
		return nil, s.unexpected("looking for beginning of value")
	}
	return v, s.checkHeld()
}

func (s *jsonScanner) checkHeld() error {
	if s.limit > 0 && s.held > s.limit {
		return s.errorf("%w: a value holds more than %d bytes (MaxTreeBytes)", pickle.ErrTreeLimit, s.limit)
	}
	return nil
}

func (s *jsonScanner) list(depth int) (any, error) {
	list := []any{}
	if s.peek() == ']' {
		s.off++
		return list, nil
	}
	for {
		v, err := s.value(depth + 1)
		if err != nil {
			return nil, err
		}
		list = append(list, v)
		switch s.peek() {
		case ',':
			s.off++
		case ']':
			s.off++
			return list, nil
		default:
			return nil, s.unexpected("after array element")
		}
	}
}

func (s *jsonScanner) object(depth int) (any, error) {
	m := map[string]any{}
	if s.peek() == '}' {
		s.off++
		return m, nil
	}
	for {
		if s.peek() != '"' {
			return nil, s.unexpected("looking for beginning of object key string")
		}
		kb, err := s.str()
		if err != nil {
			return nil, err
		}
		k := s.intern(kb)
		if s.peek() != ':' {
			return nil, s.unexpected("after object key")
		}
		s.off++
		s.held += jsonMapEntryBytes + int64(len(k))
		v, err := s.value(depth + 1)
		if err != nil {
			return nil, err
		}
		m[k] = v // a repeated key: the last wins, as encoding/json has it
		switch s.peek() {
		case ',':
			s.off++
		case '}':
			s.off++
			return m, nil
		default:
			return nil, s.unexpected("after object key:value pair")
		}
	}
}
