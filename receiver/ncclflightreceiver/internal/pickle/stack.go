package pickle // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/pickle"

import (
	"fmt"
	"unsafe"
)

// The decoder's stack, containers and memo, and what they cost: each value
// pushed is charged to the output budget (its weight, memo references in
// full) and to the tree (Options.MaxTreeBytes, memo references as a slot).

// Weights of values, in estimated bytes of the expanded result.
const (
	scalarWeight    = 16
	containerWeight = 24
)

// What a new value adds to the tree (Options.MaxTreeBytes): its slot (an
// interface in the stack, then in its container) and what it allocates:
// the container's struct, a string's header and bytes, a boxed number (the
// runtime boxes int64 values outside 0-255 and every float64). A
// container's items are values of their own.
const (
	slotBytes  = int64(unsafe.Sizeof(any(nil)))
	dictBytes  = int64(unsafe.Sizeof(Dict{}))
	listBytes  = int64(unsafe.Sizeof(list{}))
	tupleBytes = int64(unsafe.Sizeof(tuple{}))
	boxBytes   = 8
)

func treeBytesOf(v any) int64 {
	switch x := v.(type) {
	case *Dict:
		return slotBytes + dictBytes
	case *list:
		return slotBytes + listBytes
	case *tuple:
		return slotBytes + tupleBytes
	case string:
		return slotBytes + int64(unsafe.Sizeof(x)) + int64(len(x))
	case []byte:
		return slotBytes + int64(unsafe.Sizeof(x)) + int64(len(x))
	case int64:
		if x < 0 || x > 255 {
			return slotBytes + boxBytes
		}
	case float64:
		return slotBytes + boxBytes
	}
	return slotBytes
}

// weightOf is the expanded size of a stack value (before seal).
func weightOf(v any) int64 {
	switch x := v.(type) {
	case *list:
		return x.weight
	case *Dict:
		return x.weight
	case *tuple:
		return x.weight
	case string:
		return scalarWeight + int64(len(x))
	case []byte:
		return scalarWeight + int64(len(x))
	}
	return scalarWeight
}

// charge adds the weights of items to a container's weight w and checks the
// result against the output budget. Each item's weight is at most the
// budget, so the sum cannot overflow.
func (d *decoder) charge(w int64, kind string, items []any) (int64, error) {
	for _, it := range items {
		w += weightOf(it)
		if w > d.budget {
			return 0, d.overBudget(kind + " expands")
		}
	}
	return w, nil
}

// grow adds w to the weight of everything decoded so far.
func (d *decoder) grow(w int64) error {
	d.live += w
	if d.live > d.budget {
		return d.overBudget("the values decoded so far expand")
	}
	return nil
}

func (d *decoder) overBudget(kind string) error {
	return d.fail(ErrLimit, "%s to more than the %d-byte output budget (the smaller of MaxOutputBytes %d and OutputBytesPerInputByte %d x %d input bytes + %d): values shared through the memo are counted once per reference",
		kind, d.budget, d.opts.MaxOutputBytes, d.opts.OutputBytesPerInputByte, len(d.data), DefaultOutputSlackBytes)
}

func (d *decoder) fail(kind error, format string, args ...any) error {
	return &Error{Offset: d.op, Op: opName(d.data[d.op]), Kind: kind, Detail: fmt.Sprintf(format, args...)}
}

// push pushes a new value, or one fetched from the memo, charging its
// whole weight.
func (d *decoder) push(v any) error {
	return d.pushWeighing(v, weightOf(v), treeBytesOf(v))
}

// pushBuilt pushes a container built from values that were on the stack:
// only the container itself adds weight.
func (d *decoder) pushBuilt(v any) error {
	return d.pushWeighing(v, containerWeight, treeBytesOf(v))
}

// pushWeighing pushes v, which adds w to the expanded result and t to the
// tree.
func (d *decoder) pushWeighing(v any, w, t int64) error {
	d.values++
	if d.values > d.opts.MaxValues {
		return d.fail(ErrLimit, "more than %d values", d.opts.MaxValues)
	}
	if err := d.beforePush(); err != nil {
		return err
	}
	if err := d.grow(w); err != nil {
		return err
	}
	d.tree += t
	if max := d.opts.MaxTreeBytes; max > 0 && d.tree > max {
		return d.fail(ErrTreeLimit, "the values decoded so far hold more than %d bytes (MaxTreeBytes)", max)
	}
	d.stack = append(d.stack, v)
	return nil
}

// base is where the values above the innermost open MARK start.
func (d *decoder) base() int {
	if len(d.marks) == 0 {
		return 0
	}
	return d.marks[len(d.marks)-1]
}

// need checks that n values sit above the innermost MARK.
func (d *decoder) need(n int) error {
	if have := len(d.stack) - d.base(); have < n {
		return d.fail(ErrMalformed, "stack underflow: needs %d values, has %d", n, have)
	}
	return nil
}

// popMark closes the innermost MARK and returns the values above it; they
// stay valid until the next push.
func (d *decoder) popMark() ([]any, error) {
	if len(d.marks) == 0 {
		return nil, d.fail(ErrMalformed, "no open MARK")
	}
	m := d.marks[len(d.marks)-1]
	d.marks = d.marks[:len(d.marks)-1]
	items := d.stack[m:]
	d.stack = d.stack[:m]
	return items, nil
}

// fromMark replaces the values above the innermost MARK with one container
// built from them (DICT, LIST, TUPLE).
func (d *decoder) fromMark(build func(items []any) (any, error)) error {
	items, err := d.popMark()
	if err != nil {
		return err
	}
	v, err := build(items)
	if err != nil {
		return err
	}
	return d.pushBuilt(v)
}

// intoMarked handles SETITEMS and APPENDS: the values above the innermost
// MARK go into the container just below it.
func (d *decoder) intoMarked(code byte) error {
	items, err := d.popMark()
	if err != nil {
		return err
	}
	if len(d.stack)-d.base() < 1 {
		return d.fail(ErrMalformed, "stack underflow: no container below the MARK")
	}
	target := d.stack[len(d.stack)-1]
	if code == opAppends {
		if streamed, err := d.endStream(len(d.stack), items); streamed || err != nil {
			return err
		}
		return d.appendItems(target, items)
	}
	return d.setItems(target, items)
}

func (d *decoder) newTuple(items []any) (any, error) {
	if len(items) > d.opts.MaxContainerItems {
		return nil, d.fail(ErrLimit, "a tuple of %d items is over the %d-item limit", len(items), d.opts.MaxContainerItems)
	}
	w, err := d.charge(containerWeight, "a tuple", items)
	if err != nil {
		return nil, err
	}
	t := d.slabs.tuple()
	t.weight = w
	t.items = Tuple(d.slabs.values(len(items)))
	for i, v := range items {
		sv, h := seal(v)
		t.items[i] = sv
		t.height = max(t.height, int32(h+1))
	}
	if int(t.height) > d.opts.MaxDepth {
		return nil, d.fail(ErrLimit, "nesting deeper than %d", d.opts.MaxDepth)
	}
	return t, nil
}

func (d *decoder) tupleN(n int) error {
	if err := d.need(n); err != nil {
		return err
	}
	items := d.stack[len(d.stack)-n:]
	t, err := d.newTuple(items)
	if err != nil {
		return err
	}
	d.stack = d.stack[:len(d.stack)-n]
	return d.pushBuilt(t)
}

func (d *decoder) appendItems(target any, items []any) error {
	l, ok := target.(*list)
	if !ok {
		return d.fail(ErrMalformed, "appending to %s, not a list", kindOf(target))
	}
	if len(l.items)+len(items) > d.opts.MaxContainerItems {
		return d.fail(ErrLimit, "a list of more than %d items", d.opts.MaxContainerItems)
	}
	weight, err := d.charge(l.weight, "a list", items)
	if err != nil {
		return err
	}
	height := int(l.height)
	// Seal the items (in place: they are stack slots about to be dropped)
	// before checking the target, so that appending a list to itself is
	// caught as a modification of a sealed list.
	for i, v := range items {
		sv, h := seal(v)
		items[i] = sv
		height = max(height, h+1)
	}
	if l.frozen {
		return d.fail(ErrMalformed, "appending to a list that is already inside another container (a recursive structure?)")
	}
	if height > d.opts.MaxDepth {
		return d.fail(ErrLimit, "nesting deeper than %d", d.opts.MaxDepth)
	}
	l.height = int32(height)
	l.weight = weight
	if l.items == nil {
		l.items = d.slabs.values(len(items))[:0] // never alias the stack
	}
	l.items = append(l.items, items...)
	return nil
}

func (d *decoder) setItems(target any, kv []any) error {
	dict, ok := target.(*Dict)
	if !ok {
		return d.fail(ErrMalformed, "setting items of %s, not a dict", kindOf(target))
	}
	if len(kv)%2 != 0 {
		return d.fail(ErrMalformed, "%d values for key/value pairs", len(kv))
	}
	if len(dict.Items)+len(kv)/2 > d.opts.MaxContainerItems {
		return d.fail(ErrLimit, "a dict of more than %d items", d.opts.MaxContainerItems)
	}
	weight, err := d.charge(dict.weight, "a dict", kv)
	if err != nil {
		return err
	}
	height := int(dict.height)
	items := d.slabs.dictItems(len(kv) / 2)
	for i := range items {
		key := kv[2*i]
		switch key.(type) {
		case *list, *Dict:
			return d.fail(ErrMalformed, "%s as a dict key (unhashable)", kindOf(key))
		}
		k, hk := seal(key)
		v, hv := seal(kv[2*i+1])
		items[i] = DictItem{Key: k, Value: v}
		height = max(height, hk+1, hv+1)
	}
	if dict.frozen {
		return d.fail(ErrMalformed, "setting items of a dict that is already inside another container (a recursive structure?)")
	}
	if height > d.opts.MaxDepth {
		return d.fail(ErrLimit, "nesting deeper than %d", d.opts.MaxDepth)
	}
	dict.height = int32(height)
	dict.weight = weight
	if dict.Items == nil {
		dict.Items = items
	} else {
		dict.Items = append(dict.Items, items...)
	}
	return nil
}

// seal turns a stack value into the form it takes inside a container or as
// the result, and returns its nesting depth. A sealed list or dict can no
// longer be modified.
func seal(v any) (any, int) {
	switch x := v.(type) {
	case *list:
		x.frozen = true
		if x.items == nil {
			x.items = []any{}
		}
		return x.items, int(x.height)
	case *Dict:
		x.frozen = true
		return x, int(x.height)
	case *tuple:
		return x.items, int(x.height)
	}
	return v, 0
}

func (d *decoder) put(code byte) error {
	var idx uint64
	var err error
	switch code {
	case opBinPut:
		idx, err = d.uint(1)
	case opLongBinPut:
		idx, err = d.uint(4)
	default: // MEMOIZE: Python uses the number of memo entries
		idx = uint64(len(d.memo) + len(d.sparse))
	}
	if err != nil {
		return err
	}
	if err := d.need(1); err != nil {
		return err
	}
	if idx >= uint64(d.opts.MaxMemoEntries) {
		return d.fail(ErrLimit, "memo index %d is over the %d-entry limit", idx, d.opts.MaxMemoEntries)
	}
	v := d.stack[len(d.stack)-1]
	d.memoized(v)
	switch n := uint64(len(d.memo)); {
	case idx < n:
		d.memo[idx] = v
	case idx == n:
		d.memo = append(d.memo, v)
		// Keep every sparse index past the end of memo.
		for next, ok := d.sparse[uint64(len(d.memo))]; ok; next, ok = d.sparse[uint64(len(d.memo))] {
			delete(d.sparse, uint64(len(d.memo)))
			d.memo = append(d.memo, next)
		}
	default:
		if d.sparse == nil {
			d.sparse = map[uint64]any{}
		}
		d.sparse[idx] = v
	}
	return nil
}

func (d *decoder) get(code byte) error {
	size := 1
	if code == opLongBinGet {
		size = 4
	}
	idx, err := d.uint(size)
	if err != nil {
		return err
	}
	var v any
	if idx < uint64(len(d.memo)) {
		v = d.memo[idx]
	} else {
		var ok bool
		if v, ok = d.sparse[idx]; !ok {
			return d.fail(ErrMalformed, "memo index %d was never set", idx)
		}
	}
	// Shared, not copied: the tree holds one more slot.
	return d.pushWeighing(v, weightOf(v), slotBytes)
}

// kindOf names a stack value's pickle type for errors.
func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "None"
	case *list:
		return "a list"
	case *Dict:
		return "a dict"
	case *tuple:
		return "a tuple"
	case int64:
		return "an int"
	case float64:
		return "a float"
	case bool:
		return "a bool"
	case string:
		return "a str"
	case []byte:
		return "bytes"
	}
	return fmt.Sprintf("%T", v)
}

// slabs hands out the decoder's many small objects from a few large
// allocations: a 2,000-entry dump holds some 30,000 containers, and one
// allocation each would make the garbage collector the main cost of
// decoding. Slices are cut with cap == len, so that an append never writes
// into a neighbour.
type slabs struct {
	dicts  []Dict
	lists  []list
	tuples []tuple
	items  []DictItem
	vals   []any
}

const slabLen = 256

func (s *slabs) dict() *Dict {
	if len(s.dicts) == 0 {
		s.dicts = make([]Dict, slabLen)
	}
	d := &s.dicts[0]
	s.dicts = s.dicts[1:]
	d.height = 1
	d.weight = containerWeight
	return d
}

func (s *slabs) list() *list {
	if len(s.lists) == 0 {
		s.lists = make([]list, slabLen)
	}
	l := &s.lists[0]
	s.lists = s.lists[1:]
	l.height = 1
	l.weight = containerWeight
	return l
}

func (s *slabs) tuple() *tuple {
	if len(s.tuples) == 0 {
		s.tuples = make([]tuple, slabLen)
	}
	t := &s.tuples[0]
	s.tuples = s.tuples[1:]
	t.height = 1
	t.weight = containerWeight
	return t
}

func (s *slabs) dictItems(n int) []DictItem {
	if n > len(s.items) {
		if n > slabLen*4 {
			return make([]DictItem, n)
		}
		s.items = make([]DictItem, slabLen*4)
	}
	out := s.items[:n:n]
	s.items = s.items[n:]
	return out
}

func (s *slabs) values(n int) []any {
	if n > len(s.vals) {
		if n > slabLen*4 {
			return make([]any, n)
		}
		s.vals = make([]any, slabLen*4)
	}
	out := s.vals[:n:n]
	s.vals = s.vals[n:]
	return out
}
