package pickletest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/pickle"
)

// The exact bytes torch's pickler writes for
// {"a": [1, 300, -1, 1764403200340963556, 2.5, None, True], "b": ("a", "a")}.
func TestWriterWritesTorchLayout(t *testing.T) {
	w := NewWriter().BeginDict()
	w.String("a").BeginList().Int(1).Int(300).Int(-1).Int(1764403200340963556).Float(2.5).None().Bool(true).EndList()
	w.String("b").String("a").String("a").Tuple2()
	got := w.EndDict().Bytes()

	want := []byte{
		0x80, 2, // PROTO 2
		'}', '(', // EMPTY_DICT MARK
		'X', 1, 0, 0, 0, 'a', 'q', 0, // BINUNICODE "a", BINPUT 0
		']', '(', // EMPTY_LIST MARK
		'K', 1, // BININT1
		'M', 0x2c, 0x01, // BININT2 300
		'J', 0xff, 0xff, 0xff, 0xff, // BININT -1
		0x8a, 8, 0xe4, 0xb0, 0xe2, 0xcc, 0x5c, 0x6b, 0x7c, 0x18, // LONG1, 8 bytes little-endian
		'G', 0x40, 0x04, 0, 0, 0, 0, 0, 0, // BINFLOAT 2.5, big-endian
		'N', 0x88, // NONE NEWTRUE
		'e',                          // APPENDS
		'X', 1, 0, 0, 0, 'b', 'q', 1, // "b"
		'h', 0, 'h', 0, 0x86, // BINGET 0 twice, TUPLE2
		'u', '.', // SETITEMS STOP
	}
	assert.Equal(t, want, got)

	v, err := pickle.DecodeWithOptions(got, pickle.Options{})
	require.NoError(t, err)
	d := v.(*pickle.Dict)
	a, _ := d.Get("a")
	assert.Equal(t, []any{int64(1), int64(300), int64(-1), int64(1764403200340963556), 2.5, nil, true}, a)
	b, _ := d.Get("b")
	assert.Equal(t, pickle.Tuple{"a", "a"}, b)
}

func TestWriterLongMemo(t *testing.T) {
	w := NewWriter().BeginList()
	for i := range 257 {
		w.Int(int64(i)).Memo()
	}
	before := w.Len()
	w.Get(255)
	assert.Equal(t, []byte{'h', 255}, w.Bytes()[before:before+2], "BINGET up to 255")

	w = NewWriter().BeginList()
	for i := range 257 {
		w.Int(int64(i))
		if i == 256 {
			before = w.Len()
		}
		w.Memo()
	}
	w.Get(256).Get(3)
	data := w.EndList().Bytes()
	assert.Equal(t, []byte{'r', 0, 1, 0, 0}, data[before:before+5], "LONG_BINPUT past 255")
	assert.Equal(t, []byte{'j', 0, 1, 0, 0, 'h', 3}, data[before+5:before+12], "LONG_BINGET past 255")

	v, err := pickle.DecodeWithOptions(data, pickle.Options{})
	require.NoError(t, err)
	items := v.([]any)
	require.Len(t, items, 259)
	assert.Equal(t, int64(256), items[257])
	assert.Equal(t, int64(3), items[258])
}

func TestMemoBombShape(t *testing.T) {
	data := MemoBomb(3, 5)
	v, err := pickle.DecodeWithOptions(data, pickle.Options{})
	require.NoError(t, err)
	top := v.(*pickle.Dict)
	entries, ok := top.Get("entries")
	require.True(t, ok)
	require.Len(t, entries, 3)
	for _, e := range entries.([]any) {
		frames, ok := e.(*pickle.Dict).Get("frames")
		require.True(t, ok)
		assert.Equal(t, []any{int64(0), int64(1), int64(2), int64(3), int64(4)}, frames)
	}
	// The full-size bomb is about 2 MB.
	assert.InDelta(t, 2<<20, len(MemoBomb(1000, 1<<20-1)), 100<<10)
}
