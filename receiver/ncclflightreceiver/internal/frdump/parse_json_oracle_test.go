package frdump

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/pickle"
)

// The JSON decoder parseJSON replaced (issue 32), kept as the oracle that
// parse_json_oracle_test.go compares it with: encoding/json's Decoder read
// token by token, as it was, renamed.

// ParseWithOracle is ParseWithOptions with the encoding/json decoder.
func ParseWithOracle(data []byte, opts Options) (*Dump, []Warning, error) {
	return parseWithOptions(data, opts, oracleParseJSON)
}

func oracleParseJSON(data []byte, opts Options) (*Dump, []Warning, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	p := newParser(len(data), opts)
	if err := p.oracleTop(dec); err != nil {
		return nil, nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, nil, fmt.Errorf("frdump: decoding JSON: data after the top-level object at offset %d", dec.InputOffset())
	}
	return p.result()
}

func oracleJSONError(err error) error {
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("frdump: decoding JSON: %w", err)
}

func (p *parser) oracleTop(dec *json.Decoder) error {
	if _, err := dec.Token(); err != nil {
		return oracleJSONError(err)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return oracleJSONError(err)
		}
		key, _ := tok.(string) // an object's keys are strings
		if key == "entries" {
			err = p.oracleEntries(dec)
		} else {
			var v any
			if v, err = p.oracleValue(dec); err != nil {
				return err
			}
			err = p.field(key, v)
		}
		if err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil { // '}'
		return oracleJSONError(err)
	}
	return nil
}

func (p *parser) oracleEntries(dec *json.Decoder) error {
	if err := p.seeTop("entries"); err != nil {
		return err
	}
	tok, err := dec.Token()
	if err != nil {
		return oracleJSONError(err)
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
			return p.oracleTooMany(dec, i)
		}
		v, err := p.oracleValue(dec)
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
		return oracleJSONError(err)
	}
	return nil
}

func (p *parser) oracleTooMany(dec *json.Decoder, n int) error {
	var skip json.RawMessage
	for ; dec.More(); n++ {
		if err := dec.Decode(&skip); err != nil {
			return oracleJSONError(err)
		}
	}
	return tooManyEntries(n, p.opts.MaxEntries)
}

func (p *parser) oracleValue(dec *json.Decoder) (any, error) {
	var held int64
	var value func(depth int) (any, error)
	value = func(depth int) (any, error) {
		tok, err := dec.Token()
		if err != nil {
			return nil, oracleJSONError(err)
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
			return list, oracleErrorOrNil(err)
		default: // '{'
			m := map[string]any{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, oracleJSONError(err)
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
			return m, oracleErrorOrNil(err)
		}
	}
	return value(0)
}

func oracleErrorOrNil(err error) error {
	if err != nil {
		return oracleJSONError(err)
	}
	return nil
}
