package pickle // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/pickle"

// Streaming the items of one list (Options.Stream): the flight recorder
// writes a dict whose "entries" list holds thousands of dicts, which
// torch's pickler pushes one after the other above the list's MARK and
// appends with one APPENDS at the end, so that the whole list is on the
// stack before it goes anywhere. An item there is complete once the next
// value is pushed beside it (nothing can reach it any more but that
// APPENDS): it is handed to Options.Stream then, its stack slot cleared,
// and what decoding it added to the tree is no longer counted against
// MaxTreeBytes, except what the memo keeps of it (a string memoized by
// value, a frame dict shared with later entries: an item during which a
// container was memoized stays counted whole). The list itself stays
// empty. The output budget still counts every value: a stream is accepted
// or refused as without Stream.

// streaming is the state of the list being streamed.
type streaming struct {
	mark  int   // stack index of the list's MARK (its first item); -1: none
	next  int   // stack index of the item to hand over next
	start int64 // decoder.tree when that item's first value was pushed
	held  int64 // tree bytes the memo took during that item
	// pinned: a container was memoized during that item; it may be
	// referenced again, so the item stays counted.
	pinned bool
}

// startStream notes a MARK that opens the items of the top-level dict's
// Options.StreamKey list: [dict, MARK, k, v, ..., StreamKey, list, MARK].
func (d *decoder) startStream() {
	n := len(d.stack)
	if d.opts.Stream == nil || d.stream.mark >= 0 || len(d.marks) != 2 || d.marks[0] != 1 || n < 3 || (n-2-d.marks[0])%2 != 0 {
		return
	}
	if _, ok := d.stack[0].(*Dict); !ok {
		return
	}
	if _, ok := d.stack[n-1].(*list); !ok {
		return
	}
	if key, ok := d.stack[n-2].(string); !ok || key != d.opts.StreamKey {
		return
	}
	d.stream = streaming{mark: n, next: n}
}

// beforePush hands over the item a new value is pushed beside, and notes
// where the new item starts.
func (d *decoder) beforePush() error {
	s := &d.stream
	if s.mark < 0 || len(d.marks) != 2 || d.marks[1] != s.mark {
		return nil
	}
	if len(d.stack) > s.next {
		item := d.stack[s.next]
		d.stack[s.next] = nil
		if err := d.handOver(item); err != nil {
			return err
		}
	}
	s.start, s.held, s.pinned = d.tree, 0, false
	return nil
}

// handOver gives the item at stream.next, taken from its slot, to
// Options.Stream.
func (d *decoder) handOver(item any) error {
	s := &d.stream
	v, _ := seal(item)
	s.next++
	if !s.pinned {
		d.tree = s.start + s.held + slotBytes // the nil left in its slot
	}
	return d.opts.Stream(v)
}

// endStream hands over what is left when the list's MARK, at stack index
// mark, closes (APPENDS) with items above it, and reports whether it did:
// the items are not appended.
func (d *decoder) endStream(mark int, items []any) (bool, error) {
	s := &d.stream
	if s.mark < 0 || mark != s.mark {
		return false, nil
	}
	for i := s.next - mark; i < len(items); i++ {
		item := items[i]
		items[i] = nil
		if err := d.handOver(item); err != nil {
			return true, err
		}
	}
	d.stream = streaming{mark: -1}
	return true, nil
}

// memoized notes a value put in the memo while an item is streamed.
func (d *decoder) memoized(v any) {
	s := &d.stream
	if s.mark < 0 || len(d.stack) <= s.next {
		return
	}
	switch v.(type) {
	case *list, *Dict, *tuple:
		s.pinned = true
	default:
		s.held += treeBytesOf(v)
	}
}
