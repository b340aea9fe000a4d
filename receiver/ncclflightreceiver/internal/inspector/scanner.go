package inspector // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/inspector"

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// maxDepth bounds the nesting of values the scanner skips over, so a hostile
// line cannot exhaust the stack.
const maxDepth = 32

// errEnd is returned by scanner.nextKey when the object is closed.
var errEnd = errors.New("end of object")

// scanner is a small, allocation-light JSON reader for one inspector line.
// It walks objects key by key and lets the caller decide which values to
// decode and which to skip, which is what makes it several times faster than
// encoding/json's reflection for these lines.
type scanner struct {
	b   []byte
	i   int
	tmp []byte // scratch for strings that carry escapes

	escaped bool // the last string read had escapes (and lives in tmp)
}

func (s *scanner) errorf(format string, args ...any) error {
	return fmt.Errorf("%s at byte %d", fmt.Sprintf(format, args...), s.i)
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\r', '\n':
			s.i++
		default:
			return
		}
	}
}

// peek returns the next non-space byte without consuming it, 0 at the end.
func (s *scanner) peek() byte {
	s.ws()
	if s.i >= len(s.b) {
		return 0
	}
	return s.b[s.i]
}

func (s *scanner) expect(c byte) error {
	if s.peek() != c {
		if s.i >= len(s.b) {
			return s.errorf("unexpected end of line, want %q", c)
		}
		return s.errorf("unexpected %q, want %q", s.b[s.i], c)
	}
	s.i++
	return nil
}

// nextKey reads the next key of an object whose '{' was consumed. first says
// whether no key was read yet. It returns errEnd when the object closes.
func (s *scanner) nextKey(first *bool) ([]byte, error) {
	c := s.peek()
	if c == '}' {
		s.i++
		return nil, errEnd
	}
	if !*first {
		if c != ',' {
			if c == 0 {
				return nil, s.errorf("unexpected end of line inside object")
			}
			return nil, s.errorf("unexpected %q, want ',' or '}'", c)
		}
		s.i++
		s.ws()
	}
	*first = false
	key, err := s.str()
	if err != nil {
		return nil, err
	}
	if s.escaped {
		key = bytes.Clone(key) // the value read next reuses tmp
	}
	if err := s.expect(':'); err != nil {
		return nil, err
	}
	s.ws()
	return key, nil
}

// str reads a JSON string. The result aliases the input (or s.tmp when the
// string has escapes) and is valid until the next call.
func (s *scanner) str() ([]byte, error) {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		if s.i >= len(s.b) {
			return nil, s.errorf("unexpected end of line, want a string")
		}
		return nil, s.errorf("unexpected %q, want a string", s.b[s.i])
	}
	s.i++
	s.escaped = false
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			out := s.b[start:s.i]
			s.i++
			return out, nil
		case c == '\\':
			return s.strEscaped(start)
		case c < 0x20:
			return nil, s.errorf("control character 0x%02x in string", c)
		}
		s.i++
	}
	return nil, s.errorf("unterminated string")
}

// strEscaped finishes a string that holds escapes, decoding into s.tmp.
func (s *scanner) strEscaped(start int) ([]byte, error) {
	s.escaped = true
	out := append(s.tmp[:0], s.b[start:s.i]...)
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			s.tmp = out
			return out, nil
		case c < 0x20:
			return nil, s.errorf("control character 0x%02x in string", c)
		case c != '\\':
			out = append(out, c)
			s.i++
			continue
		}
		if s.i+1 >= len(s.b) {
			break
		}
		e := s.b[s.i+1]
		s.i += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := s.hex4()
			if !ok {
				return nil, s.errorf("bad \\u escape")
			}
			if utf16.IsSurrogate(r) {
				// A surrogate pair is two \u escapes; a lone half becomes U+FFFD.
				r2 := rune(-1)
				if s.i+1 < len(s.b) && s.b[s.i] == '\\' && s.b[s.i+1] == 'u' {
					save := s.i
					s.i += 2
					if v, ok := s.hex4(); ok {
						r2 = v
					} else {
						s.i = save
					}
				}
				r = utf16.DecodeRune(r, r2)
			}
			out = utf8.AppendRune(out, r)
		default:
			return nil, s.errorf("bad escape \\%c", e)
		}
	}
	return nil, s.errorf("unterminated string")
}

func (s *scanner) hex4() (rune, bool) {
	if s.i+4 > len(s.b) {
		return 0, false
	}
	var r rune
	for _, c := range s.b[s.i : s.i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	s.i += 4
	return r, true
}

// text reads a string value as a Go string, replacing invalid UTF-8 so the
// result is always safe to put in telemetry attributes.
func (s *scanner) text() (string, error) {
	if s.peek() == 'n' && string(s.word()) == "null" {
		return "", nil
	}
	b, err := s.str()
	if err != nil {
		return "", err
	}
	if !utf8.Valid(b) {
		return string(bytesToValidUTF8(b)), nil
	}
	return string(b), nil
}

func bytesToValidUTF8(b []byte) []byte {
	out := make([]byte, 0, len(b)+8)
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		out = utf8.AppendRune(out, r) // RuneError for a bad byte
		b = b[n:]
	}
	return out
}

// word consumes a bare token (a number literal, true/false/null, or the
// nan/inf that printf writes) and returns it.
func (s *scanner) word() []byte {
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		if (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || c == '+' || c == '.' {
			s.i++
			continue
		}
		break
	}
	return s.b[start:s.i]
}

// numberToken returns the text of a numeric value: a bare number (or nan/inf)
// or the contents of a string such as "nan" or "12.5". null gives "".
func (s *scanner) numberToken() ([]byte, error) {
	switch c := s.peek(); {
	case c == '"':
		return s.str()
	case c == 0:
		return nil, s.errorf("unexpected end of line, want a number")
	case c == '-' || c == '+' || c == '.' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'):
		start := s.i
		switch w := s.word(); string(w) {
		case "null":
			return nil, nil
		case "true", "false":
			s.i = start
			return nil, s.errorf("boolean where a number is expected")
		default:
			return w, nil
		}
	default:
		return nil, s.errorf("unexpected %q, want a number", c)
	}
}

// float reads a number that may be NaN or infinite. ok is false for null
// or an empty string.
func (s *scanner) float() (v float64, ok bool, err error) {
	start := s.i
	tok, err := s.numberToken()
	if err != nil || len(tok) == 0 {
		return 0, false, err
	}
	v, err = parseFloat(tok)
	if err != nil {
		s.i = start
		return 0, false, s.errorf("%v", err)
	}
	return v, true, nil
}

// integer reads a whole number. It accepts "123", 123.0 and the string form;
// ok is false for null, an empty string, NaN or infinity (an unknown value,
// not a malformed line).
func (s *scanner) integer() (v int64, ok bool, err error) {
	start := s.i
	tok, err := s.numberToken()
	if err != nil || len(tok) == 0 {
		return 0, false, err
	}
	if v, ok := parseDigits(tok); ok {
		return v, true, nil
	}
	if v, err := strconv.ParseInt(string(tok), 10, 64); err == nil {
		return v, true, nil // 19 digits
	}
	f, err := parseFloat(tok)
	if err != nil {
		s.i = start
		return 0, false, s.errorf("%v", err)
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false, nil
	}
	if f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
		s.i = start
		return 0, false, s.errorf("%q is not a 64-bit integer", tok)
	}
	return int64(f), true, nil
}

// parseDigits is the fast path for [-]digits that fit an int64.
func parseDigits(b []byte) (int64, bool) {
	neg := false
	if len(b) > 0 && b[0] == '-' {
		neg = true
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 18 { // 18 digits cannot overflow
		return 0, false
	}
	var v int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	if neg {
		v = -v
	}
	return v, true
}

func parseFloat(b []byte) (float64, error) {
	// printf("%lf") writes a negative NaN as "-nan", which strconv refuses.
	if len(b) == 4 && (b[0] == '-' || b[0] == '+') && strings.EqualFold(string(b[1:]), "nan") {
		return math.NaN(), nil
	}
	v, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		var numErr *strconv.NumError
		if errors.As(err, &numErr) && errors.Is(numErr.Err, strconv.ErrRange) {
			return v, nil // ±Inf or 0 on overflow/underflow: keep the value
		}
		return 0, fmt.Errorf("%q is not a number", b)
	}
	return v, nil
}

// skip consumes one value of any type.
func (s *scanner) skip(depth int) error {
	if depth > maxDepth {
		return s.errorf("nesting deeper than %d", maxDepth)
	}
	switch c := s.peek(); c {
	case '{':
		s.i++
		first := true
		for {
			_, err := s.nextKey(&first)
			if err == errEnd {
				return nil
			}
			if err != nil {
				return err
			}
			if err := s.skip(depth + 1); err != nil {
				return err
			}
		}
	case '[':
		s.i++
		if s.peek() == ']' {
			s.i++
			return nil
		}
		for {
			if err := s.skip(depth + 1); err != nil {
				return err
			}
			switch s.peek() {
			case ',':
				s.i++
			case ']':
				s.i++
				return nil
			case 0:
				return s.errorf("unexpected end of line inside array")
			default:
				return s.errorf("unexpected %q, want ',' or ']'", s.b[s.i])
			}
		}
	case '"':
		_, err := s.str()
		return err
	case 0:
		return s.errorf("unexpected end of line, want a value")
	default:
		start := s.i
		w := s.word()
		if len(w) == 0 {
			return s.errorf("unexpected %q, want a value", c)
		}
		switch string(w) {
		case "true", "false", "null":
			return nil
		}
		if _, err := parseFloat(w); err != nil {
			s.i = start
			return s.errorf("%v", err)
		}
		return nil
	}
}
