// Package pickle decodes the data-only subset of Python's pickle format that
// PyTorch's flight recorder writes (protocol 2, torch's own pickler, no type
// tags), and refuses everything that would import a name, construct an object
// or run code. Every limit is enforced while decoding; no input makes it
// panic.
//
// Accepted opcodes:
//
//	framing     PROTO (protocols 0 to 5), STOP, FRAME (skipped)
//	containers  MARK, EMPTY_DICT, DICT, SETITEM, SETITEMS, EMPTY_LIST, LIST,
//	            APPEND, APPENDS, EMPTY_TUPLE, TUPLE, TUPLE1, TUPLE2, TUPLE3
//	scalars     NONE, NEWTRUE, NEWFALSE, BININT1, BININT2, BININT, LONG1,
//	            LONG4, BINFLOAT
//	strings     BINUNICODE, SHORT_BINUNICODE, BINUNICODE8 (str); BINSTRING,
//	            SHORT_BINSTRING (Python 2 str, returned as string);
//	            BINBYTES, SHORT_BINBYTES, BINBYTES8 ([]byte)
//	memo        BINPUT, LONG_BINPUT, MEMOIZE, BINGET, LONG_BINGET
//
// Refused with ErrRefused: GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ,
// NEWOBJ, NEWOBJ_EX, EXT1, EXT2, EXT4, PERSID, BINPERSID. Every other opcode
// (the text opcodes of protocol 0, POP, DUP, sets, out-of-band buffers,
// unknown bytes) fails with ErrUnsupported.
//
// Two deliberate differences from Python: integers must fit in int64
// (ErrLimit otherwise), and a list or dict can no longer be modified once it
// has been placed inside another container (ErrMalformed). Picklers only do
// that for recursive structures, which data dumps never contain, and the rule
// guarantees the result is a finite tree (values may be shared, never cyclic).
// Text that is not valid UTF-8 is kept with the bad bytes replaced by U+FFFD.
//
// Memory is bounded by what is read. The decoder itself allocates at most
// some tens of bytes per input byte: values fetched from the memo are
// shared, never copied. A reader that walks the result sees every shared
// value once per reference, so each container carries its expanded size
// (its weight), a memo reference is charged in full wherever it is placed,
// and a result heavier than the output budget (Options.MaxOutputBytes,
// OutputBytesPerInputByte) is refused with ErrLimit: a reader can walk and
// copy the result in time and memory bounded by a constant multiple of the
// input.
package pickle // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/pickle"

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"
)

// Options bounds the work and memory of one DecodeWithOptions call. A zero
// field takes its default.
type Options struct {
	// MaxInputBytes caps the size of the whole stream (default 64 MiB).
	MaxInputBytes int
	// MaxStringBytes caps one string, bytes value or LONG4 (default 1 MiB).
	MaxStringBytes int
	// MaxDepth caps how deeply containers nest, and how many MARKs may be
	// open at once (default 64).
	MaxDepth int
	// MaxMemoEntries caps memo indexes: BINPUT n needs n < MaxMemoEntries
	// (default 1<<20).
	MaxMemoEntries int
	// MaxContainerItems caps the items of one list, dict or tuple (default
	// 1<<20).
	MaxContainerItems int
	// MaxValues caps how many values the stream may push in total, which
	// bounds the memory of the result: one input byte can push one value
	// (default 1<<24).
	MaxValues int
	// MaxOutputBytes caps the expanded size of the result, in estimated
	// bytes, as a reader that walks it sees it: a value fetched from the
	// memo is charged every time it is placed in a container, so a memo
	// reference to a 1,048,575-item list costs 1,048,575 items per
	// reference, not the 5 bytes it takes in the stream (a "memo bomb").
	// A scalar counts 16 (an interface slot), a string or bytes value 16 plus
	// its length, a container 24 plus its items (default 128 MiB; see
	// DefaultMaxOutputBytes).
	MaxOutputBytes int
	// OutputBytesPerInputByte also caps the expanded size at this many
	// estimated bytes per input byte, plus DefaultOutputSlackBytes, so that
	// what a stream may cost is bounded by what was read (default 64).
	// The effective budget is the smaller of the two caps.
	OutputBytesPerInputByte int
	// MaxTreeBytes, when positive, caps the estimated bytes the decoded
	// tree itself holds: every value counted once, as MaxOutputBytes
	// counts it, but a value fetched from the memo only for its 16-byte
	// slot, since it is shared, not copied. It is what a decode costs in
	// memory, where MaxOutputBytes is what a reader that walks the result
	// sees; a caller that shares one memory budget among decodes gives
	// each its share here. Over it: ErrTreeLimit. Default 0: no cap.
	MaxTreeBytes int64
	// Stream, when set, receives each item of the list that is the value
	// of the top-level dict's key StreamKey as soon as the item is
	// complete, in order, instead of the list holding it (it stays empty):
	// the items are never all held, and MaxTreeBytes counts only those not
	// handed over yet and what the memo keeps (stream.go). An error from
	// Stream stops the decode and is returned as it is.
	Stream    func(item any) error
	StreamKey string
}

// Defaults of Options.
const (
	DefaultMaxInputBytes     = 64 << 20
	DefaultMaxStringBytes    = 1 << 20
	DefaultMaxDepth          = 64
	DefaultMaxMemoEntries    = 1 << 20
	DefaultMaxContainerItems = 1 << 20
	DefaultMaxValues         = 1 << 24
	// DefaultMaxOutputBytes: torch's default ring buffer of 2,000 entries
	// with 16 frames each weighs 8 MB (22 times its 370 KB pickle: frame
	// dicts are shared through the memo), 25 MB with 64 frames each;
	// 128 MiB admits 20,000 entries of 16 frames or 10,000 of 64, while
	// what a reader builds from the result stays well inside a 256 MiB
	// agent.
	DefaultMaxOutputBytes = 128 << 20
	// DefaultOutputBytesPerInputByte: honest dumps weigh 7 (the torch
	// fixtures) to 44 (64 shared frames per entry) times their size; a
	// memo bomb, hundreds of thousands of times.
	DefaultOutputBytesPerInputByte = 64
	// DefaultOutputSlackBytes is added to the per-input-byte budget, so
	// that tiny streams are not refused for a few shared strings.
	DefaultOutputSlackBytes = 64 << 10
)

func (o Options) withDefaults() Options {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.MaxInputBytes, DefaultMaxInputBytes)
	def(&o.MaxStringBytes, DefaultMaxStringBytes)
	def(&o.MaxDepth, DefaultMaxDepth)
	def(&o.MaxMemoEntries, DefaultMaxMemoEntries)
	def(&o.MaxContainerItems, DefaultMaxContainerItems)
	def(&o.MaxValues, DefaultMaxValues)
	def(&o.MaxOutputBytes, DefaultMaxOutputBytes)
	def(&o.OutputBytesPerInputByte, DefaultOutputBytesPerInputByte)
	return o
}

// Kinds of decoding errors; test with errors.Is.
var (
	ErrRefused     = errors.New("refused: a dump must never import names, construct objects or run code")
	ErrUnsupported = errors.New("unsupported opcode")
	ErrTruncated   = errors.New("truncated input")
	ErrLimit       = errors.New("limit exceeded")
	ErrMalformed   = errors.New("malformed pickle")
	// ErrTreeLimit is the ErrLimit of Options.MaxTreeBytes (errors.Is
	// reports both).
	ErrTreeLimit = fmt.Errorf("%w: the decoded tree is over MaxTreeBytes", ErrLimit)
)

// Error is a decoding failure at a byte offset of the stream.
type Error struct {
	// Offset is where the failing opcode starts (or the input length when
	// the stream ends without STOP).
	Offset int
	// Op names the failing opcode, e.g. "GLOBAL (0x63 'c')"; empty when the
	// failure is not tied to one.
	Op string
	// Kind is ErrRefused, ErrUnsupported, ErrTruncated, ErrLimit or
	// ErrMalformed.
	Kind   error
	Detail string
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "pickle: offset %d", e.Offset)
	if e.Op != "" {
		b.WriteString(": ")
		b.WriteString(e.Op)
	}
	b.WriteString(": ")
	b.WriteString(e.Kind.Error())
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Detail)
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Kind }

// DecodeWithOptions decodes one pickle: data must hold exactly one stream,
// ending with STOP. Errors are *Error.
func DecodeWithOptions(data []byte, opts Options) (any, error) {
	opts = opts.withDefaults()
	if len(data) > opts.MaxInputBytes {
		return nil, &Error{Kind: ErrLimit, Detail: fmt.Sprintf("input of %d bytes is over the %d-byte limit", len(data), opts.MaxInputBytes)}
	}
	d := decoder{data: data, opts: opts, stack: make([]any, 0, 64), budget: outputBudget(len(data), opts), stream: streaming{mark: -1}}
	return d.run()
}

// OutputBudget is the expanded size, in estimated bytes, that a stream of n
// bytes may decode to under opts (see Options.MaxOutputBytes).
func OutputBudget(n int, opts Options) int64 {
	return outputBudget(n, opts.withDefaults())
}

func outputBudget(n int, opts Options) int64 {
	b := int64(opts.MaxOutputBytes)
	if r := int64(opts.OutputBytesPerInputByte); int64(n) < (b-DefaultOutputSlackBytes)/r {
		b = min(b, r*int64(n)+DefaultOutputSlackBytes)
	}
	return b
}

// Opcodes (Python's Lib/pickle.py names).
const (
	opMark           = '('
	opStop           = '.'
	opPop            = '0'
	opPopMark        = '1'
	opDup            = '2'
	opFloat          = 'F'
	opInt            = 'I'
	opBinInt         = 'J'
	opBinInt1        = 'K'
	opLong           = 'L'
	opBinInt2        = 'M'
	opNone           = 'N'
	opPersID         = 'P'
	opBinPersID      = 'Q'
	opReduce         = 'R'
	opString         = 'S'
	opBinString      = 'T'
	opShortBinString = 'U'
	opUnicode        = 'V'
	opBinUnicode     = 'X'
	opAppend         = 'a'
	opBuild          = 'b'
	opGlobal         = 'c'
	opDict           = 'd'
	opEmptyDict      = '}'
	opAppends        = 'e'
	opGet            = 'g'
	opBinGet         = 'h'
	opInst           = 'i'
	opLongBinGet     = 'j'
	opList           = 'l'
	opEmptyList      = ']'
	opObj            = 'o'
	opPut            = 'p'
	opBinPut         = 'q'
	opLongBinPut     = 'r'
	opSetItem        = 's'
	opTuple          = 't'
	opEmptyTuple     = ')'
	opSetItems       = 'u'
	opBinFloat       = 'G'
	// protocol 2
	opProto    = 0x80
	opNewObj   = 0x81
	opExt1     = 0x82
	opExt2     = 0x83
	opExt4     = 0x84
	opTuple1   = 0x85
	opTuple2   = 0x86
	opTuple3   = 0x87
	opNewTrue  = 0x88
	opNewFalse = 0x89
	opLong1    = 0x8a
	opLong4    = 0x8b
	// protocol 3
	opBinBytes      = 'B'
	opShortBinBytes = 'C'
	// protocol 4
	opShortBinUnicode = 0x8c
	opBinUnicode8     = 0x8d
	opBinBytes8       = 0x8e
	opEmptySet        = 0x8f
	opAddItems        = 0x90
	opFrozenSet       = 0x91
	opNewObjEx        = 0x92
	opStackGlobal     = 0x93
	opMemoize         = 0x94
	opFrame           = 0x95
	// protocol 5
	opByteArray8     = 0x96
	opNextBuffer     = 0x97
	opReadOnlyBuffer = 0x98
)

var opNames = map[byte]string{
	opMark: "MARK", opStop: "STOP", opPop: "POP", opPopMark: "POP_MARK", opDup: "DUP",
	opFloat: "FLOAT", opInt: "INT", opBinInt: "BININT", opBinInt1: "BININT1", opLong: "LONG",
	opBinInt2: "BININT2", opNone: "NONE", opPersID: "PERSID", opBinPersID: "BINPERSID",
	opReduce: "REDUCE", opString: "STRING", opBinString: "BINSTRING",
	opShortBinString: "SHORT_BINSTRING", opUnicode: "UNICODE", opBinUnicode: "BINUNICODE",
	opAppend: "APPEND", opBuild: "BUILD", opGlobal: "GLOBAL", opDict: "DICT",
	opEmptyDict: "EMPTY_DICT", opAppends: "APPENDS", opGet: "GET", opBinGet: "BINGET",
	opInst: "INST", opLongBinGet: "LONG_BINGET", opList: "LIST", opEmptyList: "EMPTY_LIST",
	opObj: "OBJ", opPut: "PUT", opBinPut: "BINPUT", opLongBinPut: "LONG_BINPUT",
	opSetItem: "SETITEM", opTuple: "TUPLE", opEmptyTuple: "EMPTY_TUPLE", opSetItems: "SETITEMS",
	opBinFloat: "BINFLOAT", opProto: "PROTO", opNewObj: "NEWOBJ", opExt1: "EXT1", opExt2: "EXT2",
	opExt4: "EXT4", opTuple1: "TUPLE1", opTuple2: "TUPLE2", opTuple3: "TUPLE3",
	opNewTrue: "NEWTRUE", opNewFalse: "NEWFALSE", opLong1: "LONG1", opLong4: "LONG4",
	opBinBytes: "BINBYTES", opShortBinBytes: "SHORT_BINBYTES",
	opShortBinUnicode: "SHORT_BINUNICODE", opBinUnicode8: "BINUNICODE8", opBinBytes8: "BINBYTES8",
	opEmptySet: "EMPTY_SET", opAddItems: "ADDITEMS", opFrozenSet: "FROZENSET",
	opNewObjEx: "NEWOBJ_EX", opStackGlobal: "STACK_GLOBAL", opMemoize: "MEMOIZE", opFrame: "FRAME",
	opByteArray8: "BYTEARRAY8", opNextBuffer: "NEXT_BUFFER", opReadOnlyBuffer: "READONLY_BUFFER",
}

// opName renders an opcode for errors: "GLOBAL (0x63 'c')", "NEWOBJ (0x81)".
func opName(c byte) string {
	name, ok := opNames[c]
	if !ok {
		name = "unknown opcode"
	}
	if c >= 0x21 && c <= 0x7e {
		return fmt.Sprintf("%s (0x%02x '%c')", name, c, c)
	}
	return fmt.Sprintf("%s (0x%02x)", name, c)
}

// refused reports the opcodes that import names, build objects or call code.
func refused(c byte) bool {
	switch c {
	case opGlobal, opStackGlobal, opReduce, opBuild, opInst, opObj, opNewObj, opNewObjEx,
		opExt1, opExt2, opExt4, opPersID, opBinPersID:
		return true
	}
	return false
}

type decoder struct {
	data  []byte
	pos   int // next byte to read
	op    int // offset of the opcode being decoded
	opts  Options
	stack []any
	marks []int // stack lengths at each open MARK
	memo  []any // indexes 0 to len-1, as picklers assign them
	// sparse holds memo indexes set past the end of memo: a stream must
	// not make the decoder allocate a slot per index it skips.
	sparse map[uint64]any
	values int // values pushed so far
	slabs  slabs
	// budget caps the weight of every container: its expanded size with
	// each memo reference counted in full (see Options.MaxOutputBytes).
	budget int64
	// live is the weight of everything decoded so far: it grows with each
	// new value and each memo reference (moving values into a container
	// leaves it unchanged), so that a stream is refused as soon as the
	// values it references pass the budget, not only once they are placed
	// in one container (torch writes all the entries, then one APPENDS).
	live int64
	// tree is what the decoded values hold: live without the expansion of
	// memo references (Options.MaxTreeBytes).
	tree int64
	// stream is the list whose items go to Options.Stream (stream.go).
	stream streaming
}

func (d *decoder) run() (any, error) {
	for d.pos < len(d.data) {
		d.op = d.pos
		code := d.data[d.pos]
		d.pos++
		var err error
		switch code {
		case opStop:
			return d.stop()
		case opProto:
			var v uint64
			if v, err = d.uint(1); err == nil && v > 5 {
				err = d.fail(ErrMalformed, "protocol %d is newer than 5", v)
			}
		case opFrame:
			var n uint64
			if n, err = d.uint(8); err == nil && n > uint64(len(d.data)-d.pos) {
				err = d.fail(ErrTruncated, "frame of %d bytes, %d left", n, len(d.data)-d.pos)
			}
		case opMark:
			if len(d.marks) >= d.opts.MaxDepth {
				err = d.fail(ErrLimit, "more than %d open MARKs", d.opts.MaxDepth)
			} else {
				d.marks = append(d.marks, len(d.stack))
				d.startStream()
			}
		case opEmptyDict:
			err = d.push(d.slabs.dict())
		case opEmptyList:
			err = d.push(d.slabs.list())
		case opEmptyTuple:
			t := d.slabs.tuple()
			t.items = Tuple{}
			err = d.push(t)
		case opDict:
			err = d.fromMark(func(items []any) (any, error) {
				dict := d.slabs.dict()
				return dict, d.setItems(dict, items)
			})
		case opList:
			err = d.fromMark(func(items []any) (any, error) {
				l := d.slabs.list()
				return l, d.appendItems(l, items)
			})
		case opTuple:
			err = d.fromMark(d.newTuple)
		case opTuple1, opTuple2, opTuple3:
			err = d.tupleN(int(code-opTuple1) + 1)
		case opSetItem, opAppend:
			n := 2
			if code == opAppend {
				n = 1
			}
			if err = d.need(n + 1); err == nil {
				target := d.stack[len(d.stack)-n-1]
				args := d.stack[len(d.stack)-n:]
				if code == opAppend {
					err = d.appendItems(target, args)
				} else {
					err = d.setItems(target, args)
				}
				d.stack = d.stack[:len(d.stack)-n]
			}
		case opSetItems, opAppends:
			err = d.intoMarked(code)
		case opNone:
			err = d.push(nil)
		case opNewTrue:
			err = d.push(true)
		case opNewFalse:
			err = d.push(false)
		case opBinInt1, opBinInt2: // unsigned, 1 and 2 bytes
			n := 1
			if code == opBinInt2 {
				n = 2
			}
			var v uint64
			if v, err = d.uint(n); err == nil {
				err = d.push(int64(v))
			}
		case opBinInt:
			var v uint64
			if v, err = d.uint(4); err == nil {
				err = d.push(int64(int32(uint32(v))))
			}
		case opLong1, opLong4:
			err = d.long(code)
		case opBinFloat:
			var b []byte
			if b, err = d.take(8); err == nil {
				err = d.push(math.Float64frombits(binary.BigEndian.Uint64(b)))
			}
		case opBinUnicode, opShortBinUnicode, opBinUnicode8, opBinString, opShortBinString,
			opBinBytes, opShortBinBytes, opBinBytes8:
			err = d.text(code)
		case opBinPut, opLongBinPut, opMemoize:
			err = d.put(code)
		case opBinGet, opLongBinGet:
			err = d.get(code)
		default:
			if refused(code) {
				err = d.fail(ErrRefused, "")
			} else {
				err = d.fail(ErrUnsupported, "")
			}
		}
		if err != nil {
			return nil, err
		}
	}
	return nil, &Error{Offset: len(d.data), Kind: ErrTruncated, Detail: "the stream ends without STOP"}
}

func (d *decoder) stop() (any, error) {
	switch {
	case len(d.marks) != 0:
		return nil, d.fail(ErrMalformed, "%d MARKs still open", len(d.marks))
	case len(d.stack) != 1:
		return nil, d.fail(ErrMalformed, "the stack holds %d values, want 1", len(d.stack))
	case d.pos != len(d.data):
		return nil, d.fail(ErrMalformed, "%d bytes after STOP", len(d.data)-d.pos)
	}
	v, _ := seal(d.stack[0])
	return v, nil
}

// uint reads an n-byte little-endian unsigned integer.
func (d *decoder) uint(n int) (uint64, error) {
	if len(d.data)-d.pos < n {
		return 0, d.fail(ErrTruncated, "needs %d argument bytes, %d left", n, len(d.data)-d.pos)
	}
	var v uint64
	for i := n - 1; i >= 0; i-- {
		v = v<<8 | uint64(d.data[d.pos+i])
	}
	d.pos += n
	return v, nil
}

// take returns the next n bytes of the stream (no copy).
func (d *decoder) take(n uint64) ([]byte, error) {
	if left := uint64(len(d.data) - d.pos); n > left {
		return nil, d.fail(ErrTruncated, "needs %d bytes, %d left", n, left)
	}
	b := d.data[d.pos : d.pos+int(n)]
	d.pos += int(n)
	return b, nil
}

// takeSized reads a length prefix of size bytes (a signed int32 when
// signed), then that many bytes.
func (d *decoder) takeSized(size int, signed bool) ([]byte, error) {
	n, err := d.uint(size)
	if err != nil {
		return nil, err
	}
	if signed {
		s := int32(uint32(n))
		if s < 0 {
			return nil, d.fail(ErrMalformed, "negative length %d", s)
		}
		n = uint64(s)
	}
	if n > uint64(d.opts.MaxStringBytes) {
		return nil, d.fail(ErrLimit, "%d bytes is over the %d-byte limit", n, d.opts.MaxStringBytes)
	}
	return d.take(n)
}

func (d *decoder) text(code byte) error {
	size := 4
	switch code {
	case opShortBinUnicode, opShortBinString, opShortBinBytes:
		size = 1
	case opBinUnicode8, opBinBytes8:
		size = 8
	}
	b, err := d.takeSized(size, code == opBinString)
	if err != nil {
		return err
	}
	switch code {
	case opBinBytes, opShortBinBytes, opBinBytes8:
		return d.push(append([]byte{}, b...))
	case opBinString, opShortBinString:
		return d.push(string(b))
	}
	if !utf8.Valid(b) {
		return d.push(strings.ToValidUTF8(string(b), "\uFFFD"))
	}
	return d.push(string(b))
}

// long decodes LONG1 and LONG4: little-endian two's complement.
func (d *decoder) long(code byte) error {
	size := 1
	if code == opLong4 {
		size = 4
	}
	b, err := d.takeSized(size, code == opLong4)
	if err != nil {
		return err
	}
	v, ok := decodeLong(b)
	if !ok {
		return d.fail(ErrLimit, "a %d-byte integer does not fit in int64", len(b))
	}
	return d.push(v)
}

// decodeLong decodes a little-endian two's complement integer, reporting
// whether it fits in an int64.
func decodeLong(b []byte) (int64, bool) {
	if len(b) == 0 {
		return 0, true
	}
	if len(b) > 8 {
		// Longer encodings fit only when the extra bytes repeat the sign.
		var sign byte
		if b[7]&0x80 != 0 {
			sign = 0xff
		}
		for _, c := range b[8:] {
			if c != sign {
				return 0, false
			}
		}
		b = b[:8]
	}
	var u uint64
	for i := len(b) - 1; i >= 0; i-- {
		u = u<<8 | uint64(b[i])
	}
	shift := uint(64 - 8*len(b))
	return int64(u<<shift) >> shift, true
}
