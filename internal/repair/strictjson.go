package repair

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Errors of DecodeStrict, wrapped with detail; test with errors.Is.
var (
	// ErrRepeatedKey: an object names a key twice (compared as
	// encoding/json matches field names: without regard to case). JSON
	// allows it and parsers disagree on which value wins, so a signed body
	// could be read one way by the gateway's tools and another by the agent.
	ErrRepeatedKey = errors.New("repair: an object names a key twice")
	// ErrUnknownField: a key no field of the type has.
	ErrUnknownField = errors.New("repair: unknown field")
	// ErrSyntax: not one JSON value of the type (bad syntax, a wrong type,
	// trailing data, too deep).
	ErrSyntax = errors.New("repair: not a JSON value of the expected type")
)

// maxJSONDepth bounds nesting: the API's deepest value is three levels.
const maxJSONDepth = 32

// DecodeStrict decodes data, exactly one JSON value, into v, refusing
// repeated keys at every level, unknown fields and trailing data.
func DecodeStrict(data []byte, v any) error {
	if err := checkKeys(data); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if strings.HasPrefix(err.Error(), "json: unknown field ") {
			return fmt.Errorf("%w: %s", ErrUnknownField, strings.TrimPrefix(err.Error(), "json: unknown field "))
		}
		return fmt.Errorf("%w: %w", ErrSyntax, err)
	}
	return nil
}

// checkKeys walks data's tokens and refuses a repeated key in any object,
// nesting deeper than maxJSONDepth and anything after the first value.
func checkKeys(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	type frame struct {
		object bool
		keys   []string // lower-cased keys seen; objects here are small
		key    bool     // an object's next string token is a key
	}
	var stack []frame
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			if len(stack) != 0 {
				return fmt.Errorf("%w: unexpected end", ErrSyntax)
			}
			break
		}
		if err != nil {
			return fmt.Errorf("%w: %w", ErrSyntax, err)
		}
		top := len(stack) - 1
		if top >= 0 && stack[top].object && stack[top].key {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:top]
				if top > 0 && stack[top-1].object {
					stack[top-1].key = true
				}
				if len(stack) == 0 {
					break
				}
				continue
			}
			k, _ := tok.(string)
			for _, seen := range stack[top].keys {
				if strings.EqualFold(seen, k) {
					return fmt.Errorf("%w: %q", ErrRepeatedKey, k)
				}
			}
			stack[top].keys = append(stack[top].keys, k)
			stack[top].key = false
			continue
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if len(stack) >= maxJSONDepth {
				return fmt.Errorf("%w: nested deeper than %d", ErrSyntax, maxJSONDepth)
			}
			stack = append(stack, frame{object: tok == json.Delim('{'), key: tok == json.Delim('{')})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:top]
		}
		// A value ended (a scalar, or a closed container): the enclosing
		// object expects a key next.
		if n := len(stack); n > 0 && stack[n-1].object {
			stack[n-1].key = true
		}
		if len(stack) == 0 {
			break
		}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: data after the value", ErrSyntax)
	}
	return nil
}
