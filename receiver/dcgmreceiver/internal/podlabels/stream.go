package podlabels // import "github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/podlabels"

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// The API server's answers are read one JSON value at a time (a watch
// event, a list item), each into a buffer of at most max bytes: a value
// over the bound is read to its end and dropped, so that neither a huge pod
// nor a hostile server holds more than max bytes of it in memory, and the
// stream goes on after it.

// objectMeta is all that is decoded of a pod (or of the
// PartialObjectMetadata the API server sends for it).
type objectMeta struct {
	Namespace       string            `json:"namespace"`
	Name            string            `json:"name"`
	UID             string            `json:"uid"`
	ResourceVersion string            `json:"resourceVersion"`
	Labels          map[string]string `json:"labels"`
}

// object is a list item or a watch event's object: a pod's metadata, or
// the Status of an ERROR event.
type object struct {
	Metadata objectMeta `json:"metadata"`
	// An ERROR event's Status.
	Code    int    `json:"code"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

type watchEvent struct {
	Type   string `json:"type"`
	Object object `json:"object"`
}

type listMeta struct {
	ResourceVersion string `json:"resourceVersion"`
	Continue        string `json:"continue"`
}

var errSyntax = errors.New("not JSON")

// valueReader reads JSON values from a stream, each bounded.
type valueReader struct {
	r   *bufio.Reader
	max int
	buf []byte
}

func newValueReader(r io.Reader, max int) *valueReader {
	return &valueReader{r: bufio.NewReaderSize(r, 32<<10), max: max}
}

// peek skips white space and returns the next byte, not read.
func (v *valueReader) peek() (byte, error) {
	for {
		b, err := v.r.ReadByte()
		if err != nil {
			return 0, err
		}
		switch b {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return b, v.r.UnreadByte()
	}
}

// expect reads the byte c after white space.
func (v *valueReader) expect(c byte) error {
	b, err := v.peek()
	if err != nil {
		return unexpected(err)
	}
	if b != c {
		return fmt.Errorf("%w: %q where %q was expected", errSyntax, b, c)
	}
	_, err = v.r.ReadByte()
	return err
}

// next reads the next value. It returns io.EOF at the end of the stream
// before a value; (nil, true, nil) for a value over the bound, read to its
// end. The bytes returned are valid until the next call.
func (v *valueReader) next() (raw []byte, oversized bool, err error) {
	first, err := v.peek()
	if err != nil {
		return nil, false, err
	}
	v.buf = v.buf[:0]
	put := func(b byte) {
		if oversized {
			return
		}
		if len(v.buf) >= v.max {
			oversized = true
			v.buf = v.buf[:0]
			return
		}
		v.buf = append(v.buf, b)
	}
	_, _ = v.r.ReadByte()
	put(first)
	switch first {
	case '{', '[', '"':
		depth, inString, escaped := 0, first == '"', false
		if !inString {
			depth = 1
		}
		for depth > 0 || inString {
			b, err := v.r.ReadByte()
			if err != nil {
				return nil, false, unexpected(err)
			}
			put(b)
			switch {
			case inString && escaped:
				escaped = false
			case inString && b == '\\':
				escaped = true
			case inString:
				inString = b != '"'
			case b == '"':
				inString = true
			case b == '{' || b == '[':
				depth++
			case b == '}' || b == ']':
				depth--
			}
		}
	case '}', ']', ',', ':':
		return nil, false, fmt.Errorf("%w: %q where a value was expected", errSyntax, first)
	default: // number, true, false, null: up to a delimiter
		for {
			b, err := v.r.ReadByte()
			if err == io.EOF {
				break
			}
			if err != nil {
				return nil, false, err
			}
			if b == ',' || b == '}' || b == ']' || b == ':' || b == ' ' || b == '\t' || b == '\r' || b == '\n' {
				_ = v.r.UnreadByte()
				break
			}
			put(b)
		}
	}
	if oversized {
		return nil, true, nil
	}
	return v.buf, false, nil
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// readList reads a list (PartialObjectMetadataList or PodList) and hands
// each item to item, one at a time; the item is nil when it is over the
// bound. It returns the list's metadata.
func readList(v *valueReader, item func(raw []byte) error) (listMeta, error) {
	var meta listMeta
	if err := v.expect('{'); err != nil {
		return meta, err
	}
	for first := true; ; first = false {
		b, err := v.peek()
		if err != nil {
			return meta, unexpected(err)
		}
		if b == '}' {
			_, _ = v.r.ReadByte()
			return meta, nil
		}
		if !first {
			if err := v.expect(','); err != nil {
				return meta, err
			}
		}
		raw, over, err := v.next()
		if err != nil {
			return meta, unexpected(err)
		}
		var key string
		if over || json.Unmarshal(raw, &key) != nil {
			return meta, fmt.Errorf("%w: a list's key", errSyntax)
		}
		if err := v.expect(':'); err != nil {
			return meta, err
		}
		switch key {
		case "metadata":
			raw, over, err := v.next()
			if err != nil {
				return meta, unexpected(err)
			}
			if over {
				return meta, fmt.Errorf("the list's metadata is over %d bytes", v.max)
			}
			if err := json.Unmarshal(raw, &meta); err != nil {
				return meta, fmt.Errorf("the list's metadata: %w", err)
			}
		case "items":
			if err := readItems(v, item); err != nil {
				return meta, err
			}
		default: // kind, apiVersion
			if _, _, err := v.next(); err != nil {
				return meta, unexpected(err)
			}
		}
	}
}

func readItems(v *valueReader, item func(raw []byte) error) error {
	b, err := v.peek()
	if err != nil {
		return unexpected(err)
	}
	if b == 'n' { // null
		raw, _, err := v.next()
		if err == nil && string(raw) != "null" {
			err = fmt.Errorf("%w: items %q", errSyntax, raw)
		}
		return err
	}
	if err := v.expect('['); err != nil {
		return err
	}
	for first := true; ; first = false {
		b, err := v.peek()
		if err != nil {
			return unexpected(err)
		}
		if b == ']' {
			_, _ = v.r.ReadByte()
			return nil
		}
		if !first {
			if err := v.expect(','); err != nil {
				return err
			}
		}
		raw, over, err := v.next()
		if err != nil {
			return unexpected(err)
		}
		if over {
			raw = nil
		}
		if err := item(raw); err != nil {
			return err
		}
	}
}
