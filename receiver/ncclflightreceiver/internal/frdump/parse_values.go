package frdump // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/pickle"
)

// The decoded values of either form, read as what a dump field holds.

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
