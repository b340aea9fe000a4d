package pickle

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/pickle/pickletest"
)

// Allocation bound of one decode: allocBytesPerInputByte bytes per input
// byte plus allocSlackBytes (the slabs). A stream can make the decoder
// allocate some tens of bytes per byte it reads (one byte pushes a 16-byte
// stack slot, or takes a Dict from a slab), never more: a value fetched
// from the memo is shared, and charged against the output budget.
const (
	allocBytesPerInputByte = 128
	allocSlackBytes        = 256 << 10
)

// allocated is what f allocated, from runtime.MemStats.TotalAlloc.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func allocBound(n int) uint64 {
	return uint64(allocBytesPerInputByte*n + allocSlackBytes)
}

// A list of 100 Nones weighs 24 + 100*16 = 1,624 bytes; memoized and
// placed 10 times in another list, that list weighs 24 + 10*1,624 = 16,264.
func TestDecodeOutputBudgetChargesEachMemoReference(t *testing.T) {
	// [[None]*100 (memoized), then 9 BINGETs of it]
	body := []byte{']', '(', ']', 'q', 0, '('}
	body = append(body, []byte(strings.Repeat("N", 100))...)
	body = append(body, 'e')
	for range 9 {
		body = append(body, 'h', 0)
	}
	body = append(body, 'e')
	in := p2(body...)
	huge := 1 << 30
	v, err := DecodeWithOptions(in, Options{MaxOutputBytes: 16264, OutputBytesPerInputByte: huge})
	require.NoError(t, err)
	require.Len(t, v, 10)

	_, err = DecodeWithOptions(in, Options{MaxOutputBytes: 16263, OutputBytesPerInputByte: huge})
	require.ErrorIs(t, err, ErrLimit)
	// Refused at the last reference, before the list that holds them is
	// complete.
	assert.ErrorContains(t, err, "BINGET (0x68 'h'): limit exceeded: the values decoded so far expand to more than the 16263-byte output budget")
	assert.ErrorContains(t, err, "counted once per reference")
	var perr *Error
	require.ErrorAs(t, err, &perr)
	assert.Equal(t, len(in)-4, perr.Offset)

	// The per-input-byte cap: 1 byte per input byte plus the slack.
	budget := int64(len(in)) + DefaultOutputSlackBytes
	assert.Equal(t, budget, OutputBudget(len(in), Options{OutputBytesPerInputByte: 1}))
	assert.Equal(t, int64(DefaultMaxOutputBytes), OutputBudget(64<<20, Options{}))
	assert.Equal(t, int64(64*1000+DefaultOutputSlackBytes), OutputBudget(1000, Options{}))
}

func TestDecodeOutputBudgetStringsAndDicts(t *testing.T) {
	// {"ab": ("ab", "ab")}: a dict of 24 + (16+2) + tuple (24 + 2*(16+2)).
	in := pickletest.NewWriter().BeginDict().String("ab").String("ab").String("ab").Tuple2().EndDict().Bytes()
	huge := 1 << 30
	const want = 24 + 18 + 24 + 2*18
	_, err := DecodeWithOptions(in, Options{MaxOutputBytes: want, OutputBytesPerInputByte: huge})
	require.NoError(t, err)
	_, err = DecodeWithOptions(in, Options{MaxOutputBytes: want - 1, OutputBytesPerInputByte: huge})
	require.ErrorIs(t, err, ErrLimit)
	assert.ErrorContains(t, err, "TUPLE2 (0x86): limit exceeded: the values decoded so far expand to more than the 101-byte output budget")
}

// Issue 19's memo bomb: 1,000 entries share one 1,048,575-item frames
// list. It is refused, having allocated no more than a constant multiple
// of its 2 MB.
func TestDecodeMemoBombRefused(t *testing.T) {
	data := pickletest.MemoBomb(1000, 1<<20-1)
	var err error
	got := allocated(func() { _, err = DecodeWithOptions(data, Options{}) })
	require.ErrorIs(t, err, ErrLimit)
	assert.ErrorContains(t, err, "BINGET (0x68 'h'): limit exceeded: the values decoded so far expand to more than the 134217728-byte output budget")
	assert.LessOrEqual(t, got, allocBound(len(data)), "allocated %d bytes decoding %d", got, len(data))
	// Refused at the 9th reference to the 16 MB list (1,048,575 items of
	// 16 bytes), not after the 1,000th.
	var perr *Error
	require.ErrorAs(t, err, &perr)
	assert.Less(t, perr.Offset, len(data)-900*10)
	t.Logf("memo bomb: %d bytes in, %d bytes allocated", len(data), got)
}

// Honest dumps decode within the default budget.
func TestDecodeFixturesWithinBudget(t *testing.T) {
	for _, path := range fixturePaths(t) {
		data := readFile(t, path)
		var err error
		got := allocated(func() { _, err = DecodeWithOptions(data, Options{}) })
		require.NoError(t, err, path)
		assert.LessOrEqual(t, got, allocBound(len(data)), path)
	}
}

// A BINPUT far past the memo's end (found by FuzzDecode) allocates nothing
// per skipped index; BINGET finds it, MEMOIZE counts entries as Python
// does, and the dense memo takes over a sparse index it reaches.
func TestDecodeSparseMemo(t *testing.T) {
	in := p2(cat([]byte{']', '(', 'K', 7, 'r'}, u32(1<<20-1), []byte{'j'}, u32(1<<20-1),
		[]byte{'K', 8, 'q', 1, 'K', 9, 0x94, 'h', 2, 'K', 5, 'q', 0, 'h', 1, 'e'})...)
	var v any
	var err error
	got := allocated(func() { v, err = DecodeWithOptions(in, Options{}) })
	require.NoError(t, err)
	// 7, 7 (BINGET 1048575), 8 (put at 1: sparse, migrated once 0 is set), 9
	// (MEMOIZE: 3 entries so far, index 2), 9 (BINGET 2), 5 (put at 0), 8
	// (BINGET 1).
	assert.Equal(t, []any{int64(7), int64(7), int64(8), int64(9), int64(9), int64(5), int64(8)}, v)
	assert.LessOrEqual(t, got, allocBound(len(in)))

	_, err = DecodeWithOptions(p2(cat([]byte{'N', 'r'}, u32(5), []byte{'h', 4})...), Options{})
	require.ErrorIs(t, err, ErrMalformed)
	assert.ErrorContains(t, err, "memo index 4 was never set")
}

// MaxTreeBytes counts what the tree holds: a memo reference is a 16-byte
// slot, not the value again. [[None]*100 (memoized), then 9 BINGETs of
// it]: two lists (their structs and slots), 100 Nones and 9 references
// (a slot each).
func TestDecodeTreeBudgetCountsMemoReferencesOnce(t *testing.T) {
	body := []byte{']', '(', ']', 'q', 0, '('}
	body = append(body, []byte(strings.Repeat("N", 100))...)
	body = append(body, 'e')
	for range 9 {
		body = append(body, 'h', 0)
	}
	body = append(body, 'e')
	in := p2(body...)
	want := 2*(slotBytes+listBytes) + 100*slotBytes + 9*slotBytes
	_, err := DecodeWithOptions(in, Options{MaxTreeBytes: want})
	require.NoError(t, err)
	_, err = DecodeWithOptions(in, Options{MaxTreeBytes: want - 1})
	require.ErrorIs(t, err, ErrTreeLimit)
	require.ErrorIs(t, err, ErrLimit, "a limit like the others")
	assert.ErrorContains(t, err, fmt.Sprintf("BINGET (0x68 'h'): limit exceeded: the decoded tree is over MaxTreeBytes: the values decoded so far hold more than %d bytes (MaxTreeBytes)", want-1))
}
