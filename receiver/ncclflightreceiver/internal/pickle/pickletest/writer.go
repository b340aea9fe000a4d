// Package pickletest writes pickle streams the way PyTorch's own pickler
// (torch/csrc/jit/serialization/pickler.cpp, as the flight recorder calls it:
// protocol 2, no type tags) does, for tests and benchmarks:
//
//   - PROTO 2 first, STOP last;
//   - ints as BININT1 (0..255), BININT2 (0..65535), BININT (int32) or LONG1
//     with 8 bytes;
//   - strings as BINUNICODE, memoized by value: the first occurrence is
//     followed by BINPUT, later ones are BINGET;
//   - dicts as EMPTY_DICT MARK key value ... SETITEMS, lists as EMPTY_LIST
//     MARK items ... APPENDS (even when empty), tuples of 2 as TUPLE2;
//   - a container used more than once is memoized after it is written
//     (Memo) and repeated with BINGET (Get).
package pickletest // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/pickle/pickletest"

import (
	"encoding/binary"
	"math"
)

// Writer builds one pickle stream. The zero value is not usable: call
// NewWriter.
type Writer struct {
	buf     []byte
	strings map[string]uint32
	nextID  uint32
}

// NewWriter starts a stream with PROTO 2.
func NewWriter() *Writer {
	return &Writer{buf: []byte{0x80, 2}, strings: map[string]uint32{}}
}

// Raw appends bytes as they are: for hand-assembled opcodes.
func (w *Writer) Raw(b ...byte) *Writer {
	w.buf = append(w.buf, b...)
	return w
}

// Int writes n with the smallest opcode torch would use.
func (w *Writer) Int(n int64) *Writer {
	switch {
	case n >= 0 && n <= math.MaxUint8:
		w.buf = append(w.buf, 'K', byte(n))
	case n >= 0 && n <= math.MaxUint16:
		w.buf = append(w.buf, 'M')
		w.buf = binary.LittleEndian.AppendUint16(w.buf, uint16(n))
	case n >= math.MinInt32 && n <= math.MaxInt32:
		w.buf = append(w.buf, 'J')
		w.buf = binary.LittleEndian.AppendUint32(w.buf, uint32(int32(n)))
	default:
		w.buf = append(w.buf, 0x8a, 8)
		w.buf = binary.LittleEndian.AppendUint64(w.buf, uint64(n))
	}
	return w
}

// Float writes BINFLOAT (big-endian).
func (w *Writer) Float(f float64) *Writer {
	w.buf = append(w.buf, 'G')
	w.buf = binary.BigEndian.AppendUint64(w.buf, math.Float64bits(f))
	return w
}

// Bool writes NEWTRUE or NEWFALSE.
func (w *Writer) Bool(b bool) *Writer {
	if b {
		w.buf = append(w.buf, 0x88)
	} else {
		w.buf = append(w.buf, 0x89)
	}
	return w
}

// None writes NONE.
func (w *Writer) None() *Writer {
	w.buf = append(w.buf, 'N')
	return w
}

// String writes s, memoized by value like torch's pushString.
func (w *Writer) String(s string) *Writer {
	if id, ok := w.strings[s]; ok {
		return w.Get(id)
	}
	w.buf = append(w.buf, 'X')
	w.buf = binary.LittleEndian.AppendUint32(w.buf, uint32(len(s)))
	w.buf = append(w.buf, s...)
	w.strings[s] = w.Memo()
	return w
}

// BeginDict and EndDict bracket a dict's keys and values.
func (w *Writer) BeginDict() *Writer { return w.Raw('}', '(') }

// EndDict closes the dict BeginDict opened.
func (w *Writer) EndDict() *Writer { return w.Raw('u') }

// BeginList and EndList bracket a list's items.
func (w *Writer) BeginList() *Writer { return w.Raw(']', '(') }

// EndList closes the list BeginList opened.
func (w *Writer) EndList() *Writer { return w.Raw('e') }

// Tuple2 turns the last two values into a tuple.
func (w *Writer) Tuple2() *Writer { return w.Raw(0x86) }

// Memo stores the value on top of the stack under the next memo id
// (BINPUT, or LONG_BINPUT past 255) and returns the id.
func (w *Writer) Memo() uint32 {
	id := w.nextID
	w.nextID++
	if id <= math.MaxUint8 {
		w.buf = append(w.buf, 'q', byte(id))
	} else {
		w.buf = append(w.buf, 'r')
		w.buf = binary.LittleEndian.AppendUint32(w.buf, id)
	}
	return id
}

// Get pushes memo entry id (BINGET, or LONG_BINGET past 255).
func (w *Writer) Get(id uint32) *Writer {
	if id <= math.MaxUint8 {
		w.buf = append(w.buf, 'h', byte(id))
	} else {
		w.buf = append(w.buf, 'j')
		w.buf = binary.LittleEndian.AppendUint32(w.buf, id)
	}
	return w
}

// Len is the number of bytes written so far.
func (w *Writer) Len() int { return len(w.buf) }

// Bytes ends the stream with STOP and returns it. Call it once.
func (w *Writer) Bytes() []byte {
	w.buf = append(w.buf, '.')
	return w.buf
}

// MemoBomb writes the attack of issue 19: a flight recorder dump whose
// entries all share one frames list of items small ints through the memo.
// With 1,000 entries and 1,048,575 items it is some 2 MB, and a reader
// that expands each reference builds a billion values.
func MemoBomb(entries, items int) []byte {
	w := NewWriter().BeginDict()
	w.String("version").String("2.10")
	w.String("entries").BeginList()
	var frames uint32
	for i := range entries {
		w.BeginDict().String("frames")
		if i == 0 {
			w.BeginList()
			for j := range items {
				w.Int(int64(j % 200))
			}
			w.EndList()
			frames = w.Memo()
		} else {
			w.Get(frames)
		}
		w.String("record_id").Int(int64(i)).EndDict()
	}
	return w.EndList().EndDict().Bytes()
}
