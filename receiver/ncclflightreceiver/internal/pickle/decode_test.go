package pickle

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/pickle/pickletest"
)

// p2 assembles a protocol-2 stream: PROTO 2, the given bytes, STOP.
func p2(body ...byte) []byte {
	return append(append([]byte{0x80, 2}, body...), '.')
}

func u32(n uint32) []byte { return binary.LittleEndian.AppendUint32(nil, n) }

func u64(n uint64) []byte { return binary.LittleEndian.AppendUint64(nil, n) }

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func TestDecodeOpcodes(t *testing.T) {
	binfloat := binary.BigEndian.AppendUint64([]byte{'G'}, math.Float64bits(2.5))
	tests := []struct {
		name string
		in   []byte
		want any
	}{
		{"NONE", p2('N'), nil},
		{"NEWTRUE", p2(0x88), true},
		{"NEWFALSE", p2(0x89), false},
		{"BININT1", p2('K', 0xff), int64(255)},
		{"BININT2", p2('M', 0x01, 0x02), int64(0x0201)},
		{"BININT negative", p2(cat([]byte{'J'}, u32(0xffffffff))...), int64(-1)},
		{"LONG1 8 bytes ns timestamp", p2(cat([]byte{0x8a, 8}, u64(1764403200340963556))...), int64(1764403200340963556)},
		{"LONG1 empty is 0", p2(0x8a, 0), int64(0)},
		{"LONG1 1 byte negative", p2(0x8a, 1, 0xff), int64(-1)},
		{"LONG1 3 bytes", p2(0x8a, 3, 0x00, 0x00, 0x80), int64(-8388608)},
		{"LONG1 9 bytes with sign extension", p2(0x8a, 9, 0, 0, 0, 0, 0, 0, 0, 0x80, 0xff), int64(math.MinInt64)},
		{"LONG4", p2(cat([]byte{0x8b}, u32(2), []byte{0x34, 0x12})...), int64(0x1234)},
		{"BINFLOAT", p2(binfloat...), 2.5},
		{"BINUNICODE", p2(cat([]byte{'X'}, u32(3), []byte("abc"))...), "abc"},
		{"BINUNICODE invalid UTF-8 is replaced", p2(cat([]byte{'X'}, u32(3), []byte{'a', 0xff, 'b'})...), "a\uFFFDb"},
		{"SHORT_BINUNICODE", p2(0x8c, 2, 'h', 'i'), "hi"},
		{"BINUNICODE8", p2(cat([]byte{0x8d}, u64(1), []byte("z"))...), "z"},
		{"SHORT_BINSTRING", p2('U', 2, 'o', 'k'), "ok"},
		{"BINSTRING", p2(cat([]byte{'T'}, u32(2), []byte("ok"))...), "ok"},
		{"SHORT_BINBYTES", p2('C', 2, 1, 2), []byte{1, 2}},
		{"BINBYTES", p2(cat([]byte{'B'}, u32(1), []byte{9})...), []byte{9}},
		{"BINBYTES8", p2(cat([]byte{0x8e}, u64(1), []byte{7})...), []byte{7}},
		{"EMPTY_LIST", p2(']'), []any{}},
		{"EMPTY_LIST APPEND", p2(']', 'K', 1, 'a'), []any{int64(1)}},
		{"EMPTY_LIST MARK APPENDS", p2(']', '(', 'K', 1, 'K', 2, 'e'), []any{int64(1), int64(2)}},
		{"LIST", p2('(', 'K', 1, 'N', 'l'), []any{int64(1), nil}},
		{"EMPTY_TUPLE", p2(')'), Tuple{}},
		{"TUPLE1", p2('K', 1, 0x85), Tuple{int64(1)}},
		{"TUPLE2", p2('K', 1, 'K', 2, 0x86), Tuple{int64(1), int64(2)}},
		{"TUPLE3", p2('K', 1, 'K', 2, 'K', 3, 0x87), Tuple{int64(1), int64(2), int64(3)}},
		{"TUPLE", p2('(', 'K', 1, 'K', 2, 'K', 3, 'K', 4, 't'), Tuple{int64(1), int64(2), int64(3), int64(4)}},
		{"EMPTY_DICT", p2('}'), &Dict{}},
		{"EMPTY_DICT SETITEM", p2('}', 'K', 1, 'K', 2, 's'), &Dict{Items: []DictItem{{int64(1), int64(2)}}}},
		{"EMPTY_DICT MARK SETITEMS", p2('}', '(', 'K', 1, 'N', 'K', 2, 0x88, 'u'),
			&Dict{Items: []DictItem{{int64(1), nil}, {int64(2), true}}}},
		{"DICT", p2('(', 'K', 1, 'K', 2, 'd'), &Dict{Items: []DictItem{{int64(1), int64(2)}}}},
		{"tuple key", p2('}', 'K', 1, 'K', 2, 0x86, 'N', 's'), &Dict{Items: []DictItem{{Tuple{int64(1), int64(2)}, nil}}}},
		{"BINPUT BINGET", p2(']', '(', 'K', 7, 'q', 0, 'h', 0, 'e'), []any{int64(7), int64(7)}},
		{"LONG_BINPUT LONG_BINGET", p2(cat([]byte{']', '(', 'K', 7, 'r'}, u32(300), []byte{'j'}, u32(300), []byte{'e'})...),
			[]any{int64(7), int64(7)}},
		{"MEMOIZE", p2(']', '(', 'K', 7, 0x94, 'h', 0, 'e'), []any{int64(7), int64(7)}},
		{"FRAME is skipped", p2(cat([]byte{0x95}, u64(1), []byte{'N'})...), nil},
		{"PROTO 4", []byte{0x80, 4, 'N', '.'}, nil},
		{"no PROTO (protocol 1 stream)", []byte{'K', 3, '.'}, int64(3)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeWithOptions(tt.in, Options{})
			require.NoError(t, err)
			if d, ok := got.(*Dict); ok {
				want := tt.want.(*Dict)
				assert.Equal(t, want.Items, d.Items)
				return
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

// A list memoized before it is filled (CPython's pickler does this) is seen
// filled by a later BINGET; memoized dicts are shared, not copied.
func TestDecodeMemoSharesValues(t *testing.T) {
	in := p2(
		']', '(', // outer list
		']', 'q', 0, '(', 'K', 1, 'e', // inner list memoized before APPENDS
		'h', 0, // the same inner list again
		'}', 'q', 1, 'K', 5, 'N', 's', // a dict
		'h', 1,
		'e',
	)
	got, err := DecodeWithOptions(in, Options{})
	require.NoError(t, err)
	outer := got.([]any)
	require.Len(t, outer, 4)
	assert.Equal(t, []any{int64(1)}, outer[0])
	assert.Equal(t, []any{int64(1)}, outer[1])
	assert.Same(t, outer[2].(*Dict), outer[3].(*Dict))
}

func TestDecodeRefusesCodeExecution(t *testing.T) {
	// The classic payload: os.system("echo pwned").
	osSystem := []byte("\x80\x02cos\nsystem\nq\x00X\x0a\x00\x00\x00echo pwnedq\x01\x85q\x02Rq\x03.")
	_, err := DecodeWithOptions(osSystem, Options{})
	require.ErrorIs(t, err, ErrRefused)
	assert.Equal(t, "pickle: offset 2: GLOBAL (0x63 'c'): refused: a dump must never import names, construct objects or run code", err.Error())

	// REDUCE is refused even when nothing was imported.
	_, err = DecodeWithOptions(p2('N', 'K', 1, 0x85, 'R'), Options{})
	var perr *Error
	require.ErrorAs(t, err, &perr)
	assert.Equal(t, 6, perr.Offset)
	assert.Equal(t, "REDUCE (0x52 'R')", perr.Op)

	// Refused inside a valid-looking dump, after containers were opened.
	w := pickletest.NewWriter().BeginDict().String("entries").BeginList()
	w.Raw(0x93) // STACK_GLOBAL
	_, err = DecodeWithOptions(w.EndList().EndDict().Bytes(), Options{})
	require.ErrorIs(t, err, ErrRefused)
	assert.Contains(t, err.Error(), "STACK_GLOBAL (0x93)")

	for code, name := range map[byte]string{
		'c': "GLOBAL", 0x93: "STACK_GLOBAL", 'R': "REDUCE", 'b': "BUILD", 'i': "INST", 'o': "OBJ",
		0x81: "NEWOBJ", 0x92: "NEWOBJ_EX", 0x82: "EXT1", 0x83: "EXT2", 0x84: "EXT4",
		'P': "PERSID", 'Q': "BINPERSID",
	} {
		_, err := DecodeWithOptions(p2('N', 'N', code, 0, 0, 0, 0), Options{})
		require.ErrorIs(t, err, ErrRefused, name)
		require.ErrorAs(t, err, &perr)
		assert.Equal(t, 4, perr.Offset, name)
		assert.True(t, strings.HasPrefix(perr.Op, name+" "), "%s: %s", name, perr.Op)
	}
}

func TestDecodeUnsupported(t *testing.T) {
	for name, in := range map[string][]byte{
		"INT (text)":     p2('I', '1', '\n'),
		"POP":            p2('0', 'N'),
		"DUP":            p2('2', 'N'),
		"EMPTY_SET":      p2(0x8f),
		"NEXT_BUFFER":    p2(0x97),
		"unknown opcode": p2(0xff),
	} {
		_, err := DecodeWithOptions(in, Options{})
		require.ErrorIs(t, err, ErrUnsupported, name)
		assert.Contains(t, err.Error(), "offset 2", name)
	}
}

func TestDecodeMalformed(t *testing.T) {
	tests := map[string]struct {
		in     []byte
		offset int
		detail string
	}{
		"APPEND with nothing":        {p2('a'), 2, "stack underflow"},
		"APPEND to a dict":           {p2('}', 'N', 'a'), 4, "appending to a dict"},
		"SETITEM on a list":          {p2(']', 'N', 'N', 's'), 5, "setting items of a list"},
		"SETITEMS odd":               {p2('}', '(', 'N', 'u'), 5, "1 values for key/value pairs"},
		"APPENDS without MARK":       {p2(']', 'e'), 3, "no open MARK"},
		"APPENDS with no list":       {p2('(', 'N', 'e'), 4, "no container below the MARK"},
		"TUPLE2 across a MARK":       {p2('N', '(', 'N', 0x86), 5, "stack underflow"},
		"BINGET never set":           {p2('h', 3), 2, "memo index 3 was never set"},
		"BINGET hole":                {p2('N', 'q', 2, 'h', 1), 5, "memo index 1 was never set"},
		"BINPUT on empty stack":      {p2('q', 0, 'N'), 2, "stack underflow"},
		"STOP with two values":       {p2('N', 'N'), 4, "the stack holds 2 values"},
		"STOP with empty stack":      {p2(), 2, "the stack holds 0 values"},
		"STOP with open MARK":        {p2('(', 'N'), 4, "1 MARKs still open"},
		"bytes after STOP":           {append(p2('N'), 'N'), 3, "1 bytes after STOP"},
		"list appended to itself":    {p2(']', 'q', 0, 'h', 0, 'a'), 7, "recursive structure"},
		"list modified after nested": {p2(']', 'q', 0, ']', 'h', 0, 'a', 'h', 0, 'N', 'a'), 12, "recursive structure"},
		"dict modified after nested": {p2('}', 'q', 0, ']', 'h', 0, 'a', 'h', 0, 'N', 'N', 's'), 13, "recursive structure"},
		"list as a dict key":         {p2('}', ']', 'N', 's'), 5, "a list as a dict key"},
		"negative BINSTRING length":  {p2(cat([]byte{'T'}, u32(0xfffffffe))...), 2, "negative length -2"},
		"PROTO 6":                    {[]byte{0x80, 6, 'N', '.'}, 0, "protocol 6"},
	}
	for name, tt := range tests {
		_, err := DecodeWithOptions(tt.in, Options{})
		var perr *Error
		require.ErrorAs(t, err, &perr, name)
		assert.ErrorIs(t, err, ErrMalformed, name)
		assert.Equal(t, tt.offset, perr.Offset, name)
		assert.Contains(t, perr.Detail, tt.detail, name)
	}
}

func TestDecodeLimits(t *testing.T) {
	nested := func(n int) []byte { // n lists, each inside the next
		body := []byte{}
		for range n {
			body = append(body, ']')
		}
		for range n - 1 {
			body = append(body, 'a')
		}
		return p2(body...)
	}
	tests := map[string]struct {
		in     []byte
		opts   Options
		detail string
	}{
		"input size":          {p2('N'), Options{MaxInputBytes: 3}, "input of 4 bytes is over the 3-byte limit"},
		"string length":       {p2(cat([]byte{'X'}, u32(5), []byte("hello"))...), Options{MaxStringBytes: 4}, "5 bytes is over the 4-byte limit"},
		"huge length prefix":  {p2(cat([]byte{0x8d}, u64(math.MaxUint64))...), Options{}, "bytes is over the 1048576-byte limit"},
		"LONG4 length":        {p2(cat([]byte{0x8b}, u32(9))...), Options{MaxStringBytes: 8}, "9 bytes is over the 8-byte limit"},
		"nesting depth":       {nested(4), Options{MaxDepth: 3}, "nesting deeper than 3"},
		"open MARKs":          {p2('(', '(', '(', '(', ')', 'N'), Options{MaxDepth: 3}, "more than 3 open MARKs"},
		"tuple depth":         {p2(')', 0x85, 0x85, 0x85), Options{MaxDepth: 3}, "nesting deeper than 3"},
		"dict depth":          {p2('}', 'N', ']', ']', 'a', 's'), Options{MaxDepth: 2}, "nesting deeper than 2"},
		"memo index":          {p2(cat([]byte{'N', 'r'}, u32(1<<20))...), Options{}, "memo index 1048576 is over the 1048576-entry limit"},
		"list items":          {p2(']', '(', 'N', 'N', 'N', 'e'), Options{MaxContainerItems: 2}, "a list of more than 2 items"},
		"dict items":          {p2('}', '(', 'N', 'N', 'K', 1, 'N', 'u'), Options{MaxContainerItems: 1}, "a dict of more than 1 items"},
		"tuple items":         {p2('(', 'N', 'N', 'N', 't'), Options{MaxContainerItems: 2}, "a tuple of 3 items"},
		"values":              {p2(']', '(', 'N', 'N', 'N', 'e'), Options{MaxValues: 3}, "more than 3 values"},
		"LONG1 over 64 bits":  {p2(0x8a, 9, 0, 0, 0, 0, 0, 0, 0, 0x80, 0), Options{}, "a 9-byte integer does not fit in int64"},
		"LONG4 over 64 bits":  {p2(cat([]byte{0x8b}, u32(9), []byte{1, 0, 0, 0, 0, 0, 0, 0, 1})...), Options{}, "does not fit in int64"},
		"defaults cap memory": {p2(cat([]byte{0x8e}, u64(2<<20))...), Options{}, "2097152 bytes is over the 1048576-byte limit"},
	}
	for name, tt := range tests {
		_, err := DecodeWithOptions(tt.in, tt.opts)
		require.ErrorIs(t, err, ErrLimit, name)
		assert.Contains(t, err.Error(), tt.detail, name)
	}
	// The same streams pass with room to spare.
	_, err := DecodeWithOptions(nested(3), Options{MaxDepth: 3})
	assert.NoError(t, err)
	_, err = DecodeWithOptions(p2(']', '(', 'N', 'N', 'e'), Options{MaxContainerItems: 2, MaxValues: 3})
	assert.NoError(t, err)
}

func TestDecodeTruncated(t *testing.T) {
	_, err := DecodeWithOptions(nil, Options{})
	require.ErrorIs(t, err, ErrTruncated)
	assert.Equal(t, "pickle: offset 0: truncated input: the stream ends without STOP", err.Error())

	for _, path := range fixturePaths(t) {
		data := readFile(t, path)
		for i := range data {
			_, err := DecodeWithOptions(data[:i], Options{})
			require.ErrorIs(t, err, ErrTruncated, "%s cut at %d", path, i)
		}
		// A byte beyond STOP is refused too.
		_, err := DecodeWithOptions(append(append([]byte{}, data...), 0), Options{})
		require.ErrorIs(t, err, ErrMalformed, path)
	}
}

// The fixtures, written by CPython's pickler, decode to exactly what
// CPython's unpickler makes of them (testdata/*.canon.json, see SOURCES.txt).
func TestDecodeFixturesMatchCPython(t *testing.T) {
	for _, path := range fixturePaths(t) {
		got, err := DecodeWithOptions(readFile(t, path), Options{})
		require.NoError(t, err, path)

		var want any
		require.NoError(t, json.Unmarshal(readFile(t, path+".canon.json"), &want))
		gotJSON, err := json.Marshal(canon(t, got))
		require.NoError(t, err)
		var gotCanon any
		require.NoError(t, json.Unmarshal(gotJSON, &gotCanon))
		assert.Equal(t, want, gotCanon, path)
	}
}

// Streams written the way torch's pickler writes them (memoized strings,
// containers memoized after they are complete, LONG1 for ns timestamps).
func TestDecodeTorchStyleStream(t *testing.T) {
	w := pickletest.NewWriter()
	w.BeginDict()
	w.String("frames").BeginList()
	w.BeginDict().String("name").String("f").String("line").Int(7).EndDict()
	frame := w.Memo() // used twice: memoized after it is written
	w.Get(frame)
	w.EndList()
	w.String("time_created_ns").Int(1764403200340963556)
	w.String("time_discovered_completed_ns").None()
	w.String("process_group").String("0").String("default_pg").Tuple2()
	w.String("name").String("default_pg") // memoized string, fetched with BINGET
	w.EndDict()
	got, err := DecodeWithOptions(w.Bytes(), Options{})
	require.NoError(t, err)

	d := got.(*Dict)
	frames, _ := d.Get("frames")
	require.Len(t, frames, 2)
	assert.Same(t, frames.([]any)[0].(*Dict), frames.([]any)[1].(*Dict))
	ts, _ := d.Get("time_created_ns")
	assert.Equal(t, int64(1764403200340963556), ts)
	none, ok := d.Get("time_discovered_completed_ns")
	assert.True(t, ok)
	assert.Nil(t, none)
	pg, _ := d.Get("process_group")
	assert.Equal(t, Tuple{"0", "default_pg"}, pg)
	name, _ := d.Get("name")
	assert.Equal(t, "default_pg", name)
}

func TestDecodeLongMemoIndexes(t *testing.T) {
	w := pickletest.NewWriter().BeginList()
	for i := range 600 { // past 255: LONG_BINPUT and LONG_BINGET
		w.String("s" + strconv.Itoa(i))
	}
	for i := range 600 {
		w.String("s" + strconv.Itoa(i))
	}
	got, err := DecodeWithOptions(w.EndList().Bytes(), Options{})
	require.NoError(t, err)
	items := got.([]any)
	require.Len(t, items, 1200)
	assert.Equal(t, "s599", items[599])
	assert.Equal(t, "s300", items[900])
}

func FuzzDecode(f *testing.F) {
	for _, path := range fixturePaths(f) {
		f.Add(readFile(f, path))
	}
	f.Add(p2('}', '(', 'K', 1, ']', 'q', 0, '(', 'N', 'e', 'h', 0, 'u'))
	f.Add([]byte("\x80\x02cos\nsystem\nq\x00X\x02\x00\x00\x00idq\x01\x85q\x02Rq\x03."))
	f.Add(pickletest.MemoBomb(40, 2000)) // small enough to mutate
	if !fuzzing() {
		// Issue 19's full-size bomb, 2 MB: checked on every test run, left
		// out of the mutation corpus, where it would make each execution
		// take a second.
		f.Add(pickletest.MemoBomb(1000, 1<<20-1))
	}
	opts := Options{MaxDepth: 16}
	f.Fuzz(func(t *testing.T, data []byte) {
		var v any
		var err error
		// Memory bounded by what is read: values shared through the memo
		// must not be expanded, and the result must be within budget.
		if got := allocated(func() { v, err = DecodeWithOptions(data, opts) }); got > allocBound(len(data)) {
			t.Fatalf("decoding %d bytes allocated %d, over %d", len(data), got, allocBound(len(data)))
		}
		if err != nil {
			var perr *Error
			if !errors.As(err, &perr) {
				t.Fatalf("error is not *Error: %v", err)
			}
			if perr.Offset < 0 || perr.Offset > len(data) {
				t.Fatalf("offset %d outside the input of %d bytes", perr.Offset, len(data))
			}
			return
		}
		// A decoded value is a finite tree within the depth limit.
		if depth := depthOf(v); depth > opts.MaxDepth {
			t.Fatalf("depth %d over the limit", depth)
		}
		// Streaming the top-level dict's "entries" costs no more, and a
		// stream read whole is read streamed, the items in the same order
		// (the ones streamed, then any appended one by one).
		var items []any
		sopts := opts
		sopts.StreamKey, sopts.Stream = "entries", func(item any) error {
			items = append(items, item)
			return nil
		}
		var sv any
		if got := allocated(func() { sv, err = DecodeWithOptions(data, sopts) }); got > allocBound(len(data)) {
			t.Fatalf("decoding %d bytes streamed allocated %d, over %d", len(data), got, allocBound(len(data)))
		}
		if err != nil {
			return // streaming seals an entry once the next value is pushed beside it: it may refuse more
		}
		if d, ok := v.(*Dict); ok && len(items) > 0 {
			if whole, one := entriesOf(d); one {
				rest, _ := entriesOf(sv.(*Dict))
				if streamed := len(items) + len(rest); len(whole) != streamed {
					t.Fatalf("%d entries read whole, %d streamed", len(whole), streamed)
				}
			}
		}
	})
}

// entriesOf returns the items of the top-level dict's "entries" list, and
// whether the dict has that key once.
func entriesOf(d *Dict) ([]any, bool) {
	var out []any
	n := 0
	for _, it := range d.Items {
		if k, _ := it.Key.(string); k == "entries" {
			out, _ = it.Value.([]any)
			n++
		}
	}
	return out, n == 1
}

// fuzzing reports whether the test binary runs with -test.fuzz (mutating),
// rather than over the seed corpus only.
func fuzzing() bool {
	fl := flag.Lookup("test.fuzz")
	return fl != nil && fl.Value.String() != ""
}

func depthOf(v any) int {
	inner := 0
	switch x := v.(type) {
	case []any:
		for _, it := range x {
			inner = max(inner, depthOf(it))
		}
	case Tuple:
		for _, it := range x {
			inner = max(inner, depthOf(it))
		}
	case *Dict:
		for _, it := range x.Items {
			inner = max(inner, depthOf(it.Key), depthOf(it.Value))
		}
	default:
		return 0
	}
	return inner + 1
}

// canon renders a decoded value like testdata's canon.json.
func canon(t *testing.T, v any) any {
	switch x := v.(type) {
	case nil:
		return nil
	case bool:
		return map[string]any{"b": x}
	case int64:
		return map[string]any{"i": strconv.FormatInt(x, 10)}
	case float64:
		return map[string]any{"f": strconv.FormatUint(math.Float64bits(x), 10)}
	case string:
		return map[string]any{"s": x}
	case Tuple:
		out := []any{}
		for _, it := range x {
			out = append(out, canon(t, it))
		}
		return map[string]any{"t": out}
	case []any:
		out := []any{}
		for _, it := range x {
			out = append(out, canon(t, it))
		}
		return map[string]any{"l": out}
	case *Dict:
		out := []any{}
		for _, it := range x.Items {
			out = append(out, []any{canon(t, it.Key), canon(t, it.Value)})
		}
		return map[string]any{"d": out}
	}
	t.Fatalf("unexpected %T", v)
	return nil
}

func fixturePaths(tb testing.TB) []string {
	paths, err := filepath.Glob(filepath.Join("testdata", "*", "nccl_trace_rank_*[0-9]"))
	require.NoError(tb, err)
	require.Len(tb, paths, 3)
	return paths
}

func readFile(tb testing.TB, path string) []byte {
	data, err := os.ReadFile(path)
	require.NoError(tb, err)
	return data
}

// BenchmarkDecode2000Entries decodes a stream shaped like a 2,000-entry
// flight recorder dump as torch's pickler writes it: 22 keys per entry and
// 16 frames drawn from a few dozen shared frame dicts.
func BenchmarkDecode2000Entries(b *testing.B) {
	w := pickletest.NewWriter().BeginDict().String("entries").BeginList()
	frameIDs := map[int]uint32{}
	for i := range 2000 {
		w.BeginDict()
		w.String("frames").BeginList()
		for f := range 16 {
			k := i%4 + f
			if id, ok := frameIDs[k]; ok {
				w.Get(id)
				continue
			}
			w.BeginDict().String("name").String("fn_" + strconv.Itoa(k)).
				String("filename").String("module_" + strconv.Itoa(k%7) + ".py").
				String("line").Int(int64(100 + k)).EndDict()
			frameIDs[k] = w.Memo()
		}
		w.EndList()
		for _, key := range []string{"record_id", "pg_id", "collective_seq_id", "p2p_seq_id", "op_id", "timeout_ms"} {
			w.String(key).Int(int64(i * 1000))
		}
		w.String("process_group").String("0").String("default_pg").Tuple2()
		w.String("thread_name").String("pt_nccl_watchdg").String("thread_id").String("140230000000000")
		w.String("profiling_name").String("nccl:all_reduce")
		w.String("time_created_ns").Int(1764403200340963556 + int64(i))
		w.String("duration_ms").Float(9.5)
		for _, key := range []string{"input_sizes", "output_sizes"} {
			w.String(key).BeginList().BeginList().Int(13107200).EndList().EndList()
		}
		for _, key := range []string{"input_dtypes", "output_dtypes"} {
			w.String(key).BeginList().String("BFloat16").EndList()
		}
		w.String("state").String("completed")
		w.String("time_discovered_started_ns").Int(1764403200340963556 + int64(i))
		w.String("time_discovered_completed_ns").None()
		w.String("retired").Bool(true).String("is_p2p").Bool(false)
		w.EndDict()
	}
	data := w.EndList().EndDict().Bytes()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeWithOptions(data, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
