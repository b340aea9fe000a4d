package frdump // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"

import (
	"fmt"
	"io"
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// jsonScanner reads JSON from one byte slice as encoding/json's Decoder
// does — the same grammar (RFC 8259: no trailing commas, no leading zeros,
// white space is space, tab, CR and LF), strings decoded the same way
// (escapes, \u surrogate pairs, a lone surrogate or an invalid UTF-8 byte
// replaced by U+FFFD) and numbers kept as their text — but without tokens:
// its callers read the values they expect where they expect them. Its
// errors name the offset and, for input that ends too soon, wrap
// io.ErrUnexpectedEOF.
type jsonScanner struct {
	data []byte
	off  int
	// held is what the value being decoded holds, in estimated bytes
	// (Options.MaxTreeBytes): jsonSlotBytes a value, plus a string's or a
	// number's bytes, plus jsonMapEntryBytes and the key's bytes an object
	// member; limit caps it (0: no cap).
	held, limit int64
	buf         []byte // the last string that had to be decoded
	stack       []byte // skip's open containers
	// interned holds one copy of each short string read, shared by every
	// value that has it: a dump repeats its keys, states, names and dtypes
	// in every entry.
	interned map[string]string
	entry    jsonEntry // jsonEntryFast's entry (parse_json_entry.go)
}

const (
	maxInternedLen     = 64
	maxInternedStrings = 512
	// maxJSONSkipDepth is encoding/json's nesting limit, which held for
	// the entries past MaxEntries that are only counted.
	maxJSONSkipDepth = 10000
)

func (s *jsonScanner) ws() {
	for s.off < len(s.data) {
		switch s.data[s.off] {
		case ' ', '\t', '\r', '\n':
			s.off++
		default:
			return
		}
	}
}

// peek skips white space and returns the next byte, 0 at the end (a NUL
// byte is invalid wherever peek is used: unexpected tells them apart).
func (s *jsonScanner) peek() byte {
	s.ws()
	if s.off >= len(s.data) {
		return 0
	}
	return s.data[s.off]
}

func (s *jsonScanner) errorf(format string, args ...any) error {
	return fmt.Errorf("frdump: decoding JSON: "+format+" at offset %d", append(args, s.off)...)
}

// unexpected is the error for the byte at s.off, or for the end of the
// input, where something else was expected (context, in encoding/json's
// words).
func (s *jsonScanner) unexpected(context string) error {
	if s.off >= len(s.data) {
		return fmt.Errorf("frdump: decoding JSON: %w", io.ErrUnexpectedEOF)
	}
	return s.errorf("invalid character %s %s", quoteChar(s.data[s.off]), context)
}

// quoteChar formats c as encoding/json's errors do.
func quoteChar(c byte) string {
	switch c {
	case '\'':
		return `'\''`
	case '"':
		return `'"'`
	}
	q := strconv.Quote(string(rune(c)))
	return "'" + q[1:len(q)-1] + "'"
}

// charge adds n to held and reports whether it is still within limit.
func (s *jsonScanner) charge(n int64) bool {
	s.held += n
	return s.limit <= 0 || s.held <= s.limit
}

// str reads the string whose opening quote is at s.off and returns its
// decoded bytes: the input's own bytes when it has no escape and is valid
// UTF-8 (nearly always), else s.buf. They are valid until the next call.
func (s *jsonScanner) str() ([]byte, error) {
	start := s.off + 1
	for i := start; i < len(s.data); i++ {
		switch c := s.data[i]; {
		case c == '"':
			s.off = i + 1
			return s.data[start:i], nil
		case c == '\\' || c < 0x20 || c >= utf8.RuneSelf:
			return s.strSlow(start, i)
		}
	}
	s.off = len(s.data)
	return nil, s.unexpected("")
}

// strSlow goes on from data[i] with a string that has an escape, a control
// character (an error) or a byte outside ASCII.
func (s *jsonScanner) strSlow(start, i int) ([]byte, error) {
	plain := true // no escape
	for ; i < len(s.data); i++ {
		switch c := s.data[i]; {
		case c == '"':
			raw := s.data[start:i]
			s.off = i + 1
			if plain && utf8.Valid(raw) {
				return raw, nil
			}
			s.buf = unquoteJSON(s.buf[:0], raw)
			return s.buf, nil
		case c < 0x20:
			s.off = i
			return nil, s.unexpected("in string literal")
		case c == '\\':
			plain = false
			s.off = i + 1
			if s.off >= len(s.data) {
				return nil, s.unexpected("")
			}
			switch s.data[s.off] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				for range 4 {
					s.off++
					if s.off >= len(s.data) || unhex(s.data[s.off]) < 0 {
						return nil, s.unexpected(`in \u hexadecimal character escape`)
					}
				}
			default:
				return nil, s.unexpected("in string escape code")
			}
			i = s.off
		}
	}
	s.off = len(s.data)
	return nil, s.unexpected("")
}

func unhex(c byte) rune {
	switch {
	case '0' <= c && c <= '9':
		return rune(c - '0')
	case 'a' <= c && c <= 'f':
		return rune(c - 'a' + 10)
	case 'A' <= c && c <= 'F':
		return rune(c - 'A' + 10)
	}
	return -1
}

// getu4 decodes \uXXXX at the start of s, or returns -1.
func getu4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range s[2:6] {
		h := unhex(c)
		if h < 0 {
			return -1
		}
		r = r<<4 | h
	}
	return r
}

// unquoteJSON appends the value of the string raw (its bytes between the
// quotes, checked by strSlow) to dst as encoding/json's unquote does: a
// \u surrogate pair is one rune, a lone surrogate and each byte of invalid
// UTF-8 are U+FFFD.
func unquoteJSON(dst, raw []byte) []byte {
	for r := 0; r < len(raw); {
		c := raw[r]
		switch {
		case c == '\\':
			switch e := raw[r+1]; e {
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				rr := getu4(raw[r:])
				r += 6
				if utf16.IsSurrogate(rr) {
					if dec := utf16.DecodeRune(rr, getu4(raw[r:])); dec != unicode.ReplacementChar {
						dst = utf8.AppendRune(dst, dec)
						r += 6
						continue
					}
					rr = unicode.ReplacementChar
				}
				dst = utf8.AppendRune(dst, rr)
				continue
			default: // '"', '\\', '/'
				dst = append(dst, e)
			}
			r += 2
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			r++
		default:
			rr, size := utf8.DecodeRune(raw[r:])
			dst = utf8.AppendRune(dst, rr) // RuneError for an invalid byte
			r += size
		}
	}
	return dst
}

// intern returns b as a string, one copy per distinct short string.
func (s *jsonScanner) intern(b []byte) string {
	if len(b) > maxInternedLen {
		return string(b)
	}
	if v, ok := s.interned[string(b)]; ok {
		return v
	}
	v := string(b)
	if len(s.interned) < maxInternedStrings {
		if s.interned == nil {
			s.interned = make(map[string]string, 64)
		}
		s.interned[v] = v
	}
	return v
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// number reads the number at s.off, which starts with '-' or a digit, and
// returns its text.
func (s *jsonScanner) number() ([]byte, error) {
	start := s.off
	if s.data[s.off] == '-' {
		s.off++
	}
	switch {
	case s.off >= len(s.data):
		return nil, s.unexpected("")
	case s.data[s.off] == '0':
		s.off++
	case isDigit(s.data[s.off]):
		s.digits()
	default:
		return nil, s.unexpected("in numeric literal")
	}
	if s.off < len(s.data) && s.data[s.off] == '.' {
		s.off++
		if s.off >= len(s.data) || !isDigit(s.data[s.off]) {
			return nil, s.unexpected("after decimal point in numeric literal")
		}
		s.digits()
	}
	if s.off < len(s.data) && (s.data[s.off] == 'e' || s.data[s.off] == 'E') {
		s.off++
		if s.off < len(s.data) && (s.data[s.off] == '+' || s.data[s.off] == '-') {
			s.off++
		}
		if s.off >= len(s.data) || !isDigit(s.data[s.off]) {
			return nil, s.unexpected("in exponent of numeric literal")
		}
		s.digits()
	}
	return s.data[start:s.off], nil
}

func (s *jsonScanner) digits() {
	for s.off < len(s.data) && isDigit(s.data[s.off]) {
		s.off++
	}
}

// literal reads true, false or null, whose first byte is at s.off.
func (s *jsonScanner) literal(word string) error {
	for k := range len(word) {
		if s.off >= len(s.data) || s.data[s.off] != word[k] {
			return s.unexpected("in literal " + word)
		}
		s.off++
	}
	return nil
}

// scalar reads a string, number or literal at s.off, checking it only.
func (s *jsonScanner) scalar() error {
	var err error
	switch c := s.peek(); {
	case c == '"':
		_, err = s.str()
	case c == '-' || isDigit(c):
		_, err = s.number()
	case c == 't':
		err = s.literal("true")
	case c == 'f':
		err = s.literal("false")
	case c == 'n':
		err = s.literal("null")
	default:
		err = s.unexpected("looking for beginning of value")
	}
	return err
}

// skip reads one value without decoding it, as encoding/json's Decode into
// a json.RawMessage checks it.
func (s *jsonScanner) skip() error {
	s.stack = s.stack[:0]
	for {
		// A value.
		switch s.peek() {
		case '{', '[':
			if len(s.stack) == maxJSONSkipDepth {
				return s.errorf("exceeded max depth")
			}
			c := s.data[s.off]
			s.off++
			if c == '{' {
				s.stack = append(s.stack, '}')
				if s.peek() != '}' {
					if err := s.skipKey(); err != nil {
						return err
					}
					continue
				}
			} else {
				s.stack = append(s.stack, ']')
				if s.peek() != ']' {
					continue
				}
			}
			s.off++
			s.stack = s.stack[:len(s.stack)-1]
		default:
			if err := s.scalar(); err != nil {
				return err
			}
		}
		// What follows a value: close the containers it ends.
		for {
			if len(s.stack) == 0 {
				return nil
			}
			end := s.stack[len(s.stack)-1]
			c := s.peek()
			if c == end {
				s.off++
				s.stack = s.stack[:len(s.stack)-1]
				continue
			}
			if c != ',' {
				if end == '}' {
					return s.unexpected("after object key:value pair")
				}
				return s.unexpected("after array element")
			}
			s.off++
			if end == '}' {
				if err := s.skipKey(); err != nil {
					return err
				}
			}
			break
		}
	}
}

// skipKey reads an object key and its colon.
func (s *jsonScanner) skipKey() error {
	if s.peek() != '"' {
		return s.unexpected("looking for beginning of object key string")
	}
	if _, err := s.str(); err != nil {
		return err
	}
	if s.peek() != ':' {
		return s.unexpected("after object key")
	}
	s.off++
	return nil
}
