package frdump // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

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
// mapped entries), at most Options.MaxTreeBytes of them.
func parseJSON(data []byte, opts Options) (*Dump, []Warning, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	p := newParser(len(data), opts)
	if err := p.jsonTop(dec); err != nil {
		return nil, nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, nil, fmt.Errorf("frdump: decoding JSON: data after the top-level object at offset %d", dec.InputOffset())
	}
	return p.result()
}

func jsonError(err error) error {
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("frdump: decoding JSON: %w", err)
}

// jsonTop maps the top-level object, whose first byte the caller checked
// is '{'.
func (p *parser) jsonTop(dec *json.Decoder) error {
	if _, err := dec.Token(); err != nil {
		return jsonError(err)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return jsonError(err)
		}
		key, _ := tok.(string) // an object's keys are strings
		if key == "entries" {
			err = p.jsonEntries(dec)
		} else {
			var v any
			if v, err = p.jsonValue(dec); err != nil {
				return err
			}
			err = p.field(key, v)
		}
		if err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil { // '}'
		return jsonError(err)
	}
	return nil
}

// jsonEntries maps the entries list one entry at a time.
func (p *parser) jsonEntries(dec *json.Decoder) error {
	if err := p.seeTop("entries"); err != nil {
		return err
	}
	tok, err := dec.Token()
	if err != nil {
		return jsonError(err)
	}
	switch tok {
	case json.Delim('['):
	case nil:
		return nil
	case json.Delim('{'):
		return &FieldError{Path: "entries", Want: "a list", Got: "a dict"}
	default:
		return &FieldError{Path: "entries", Want: "a list", Got: describe(tok)}
	}
	for i := 0; dec.More(); i++ {
		if i == p.opts.MaxEntries {
			return p.tooManyJSONEntries(dec, i)
		}
		v, err := p.jsonValue(dec)
		if err != nil {
			return err
		}
		if !p.charge(1, entryBytes, "entries") {
			return p.overErr
		}
		if p.opts.Entry != nil {
			err = p.stream(i, -1, v)
		} else {
			p.dump.Entries = append(p.dump.Entries, Entry{})
			err = p.entry(i, v, &p.dump.Entries[i])
			p.entryCount++
		}
		if err == nil {
			err = p.overErr
		}
		if err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil { // ']'
		return jsonError(err)
	}
	return nil
}

// tooManyJSONEntries counts the entries left, without decoding them, to
// say how many the dump has.
func (p *parser) tooManyJSONEntries(dec *json.Decoder, n int) error {
	var skip json.RawMessage
	for ; dec.More(); n++ {
		if err := dec.Decode(&skip); err != nil {
			return jsonError(err)
		}
	}
	return tooManyEntries(n, p.opts.MaxEntries)
}

// Estimated bytes of decoded JSON values (Options.MaxTreeBytes): an
// interface slot, a string's bytes, a map entry.
const (
	jsonSlotBytes     = 16
	jsonMapEntryBytes = 48
	maxJSONDepth      = 64
)

// jsonValue decodes one value (a top-level field's, or an entry) token by
// token, numbers as json.Number, refusing one that holds more than
// Options.MaxTreeBytes or nests deeper than 64.
func (p *parser) jsonValue(dec *json.Decoder) (any, error) {
	var held int64
	var value func(depth int) (any, error)
	value = func(depth int) (any, error) {
		tok, err := dec.Token()
		if err != nil {
			return nil, jsonError(err)
		}
		held += jsonSlotBytes
		if s, ok := tok.(string); ok {
			held += int64(len(s))
		} else if n, ok := tok.(json.Number); ok {
			held += int64(len(n))
		}
		if limit := p.opts.MaxTreeBytes; limit > 0 && held > limit {
			return nil, fmt.Errorf("frdump: decoding JSON: %w: a value holds more than %d bytes (MaxTreeBytes) at offset %d", pickle.ErrTreeLimit, limit, dec.InputOffset())
		}
		d, ok := tok.(json.Delim)
		if !ok {
			return tok, nil
		}
		if depth == maxJSONDepth {
			return nil, fmt.Errorf("frdump: decoding JSON: nesting deeper than %d at offset %d", maxJSONDepth, dec.InputOffset())
		}
		switch d {
		case '[':
			list := []any{}
			for dec.More() {
				v, err := value(depth + 1)
				if err != nil {
					return nil, err
				}
				list = append(list, v)
			}
			_, err = dec.Token() // ']'
			return list, jsonErrorOrNil(err)
		default: // '{'
			m := map[string]any{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, jsonError(err)
				}
				k, _ := kt.(string) // an object's keys are strings
				held += jsonMapEntryBytes + int64(len(k))
				v, err := value(depth + 1)
				if err != nil {
					return nil, err
				}
				m[k] = v // a repeated key: the last wins, as encoding/json has it
			}
			_, err = dec.Token() // '}'
			return m, jsonErrorOrNil(err)
		}
	}
	return value(0)
}

func jsonErrorOrNil(err error) error {
	if err != nil {
		return jsonError(err)
	}
	return nil
}
