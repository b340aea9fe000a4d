package pickle // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/pickle"

// The Go values DecodeWithOptions returns:
//
//	pickle            Go
//	dict              *Dict (keys in insertion order)
//	list              []any
//	tuple             Tuple
//	int               int64
//	float             float64
//	str               string
//	bytes             []byte
//	True / False      bool
//	None              nil
//
// Values fetched from the memo (BINGET) are shared, not copied: the same
// *Dict, or slices with the same backing array, can appear in several places.
// Treat every decoded value as read-only.

// Dict is a pickled dict with its items in the order they were set.
type Dict struct {
	Items []DictItem

	height int32 // nesting depth of the value, 1 for a dict of scalars
	frozen bool  // placed inside another container: no more SETITEMs
	weight int64 // expanded size in estimated bytes (Options.MaxOutputBytes)
}

// DictItem is one key/value pair of a Dict.
type DictItem struct {
	Key, Value any
}

// Len is the number of items, counting a key that was set twice twice.
func (d *Dict) Len() int { return len(d.Items) }

// Get returns the value of key; when a stream set the key more than once,
// the last value wins, as it would in Python. Keys compare with Go's ==, so
// int64(1) and float64(1) are different keys (unlike Python), and a Tuple key
// never matches.
func (d *Dict) Get(key any) (any, bool) {
	if !comparableKey(key) {
		return nil, false
	}
	for i := len(d.Items) - 1; i >= 0; i-- {
		k := d.Items[i].Key
		if comparableKey(k) && k == key {
			return d.Items[i].Value, true
		}
	}
	return nil, false
}

// Tuple is a pickled tuple.
type Tuple []any

// comparableKey reports whether k can be compared with == without a panic.
func comparableKey(k any) bool {
	switch k.(type) {
	case nil, string, int64, float64, bool:
		return true
	}
	return false
}

// list is a list while it is being built: the stack and the memo refer to
// it by pointer, so that APPENDs after a BINPUT are seen by later BINGETs
// (Python's pickler memoizes a list before it appends the items).
type list struct {
	items  []any
	height int32
	frozen bool
	weight int64
}

// tuple carries a tuple's nesting depth while it is on the stack or in the
// memo, so that depth checks never walk a value twice.
type tuple struct {
	items  Tuple
	height int32
	weight int64
}
