package pickle

import (
	"errors"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/pickle/pickletest"
)

// dumpLike writes {"version": "2.10", "entries": [{"id": 0, "name": "op"},
// ...]} as torch's pickler does: the entries pushed one after the other,
// one APPENDS. memoEntries memoizes each entry dict, as Python's pickler
// does.
func dumpLike(entries int, memoEntries bool) []byte {
	w := pickletest.NewWriter().BeginDict().String("version").String("2.10").String("entries").BeginList()
	for i := range entries {
		w.BeginDict().String("id").Int(int64(i)).String("name").String("op").EndDict()
		if memoEntries {
			w.Memo()
		}
	}
	return w.EndList().EndDict().Bytes()
}

// Stream receives the entries in order as they complete; the list stays
// empty, and the rest of the dict is decoded as usual.
func TestStreamHandsOverTheEntries(t *testing.T) {
	var got []int64
	opts := Options{StreamKey: "entries", Stream: func(item any) error {
		d, ok := item.(*Dict)
		require.True(t, ok, "%T", item)
		require.Len(t, d.Items, 2)
		got = append(got, d.Items[0].Value.(int64))
		return nil
	}}
	v, err := DecodeWithOptions(dumpLike(300, false), opts)
	require.NoError(t, err)
	want := make([]int64, 300)
	for i := range want {
		want[i] = int64(i)
	}
	assert.Equal(t, want, got)
	top := v.(*Dict)
	require.Len(t, top.Items, 2)
	assert.Equal(t, "2.10", top.Items[0].Value)
	assert.Empty(t, top.Items[1].Value, "the list holds nothing")

	// Python's pickler appends in batches (APPENDS per 1,000): each batch
	// streams the same way. [MARK 1 2 APPENDS MARK 3 APPENDS]
	got = nil
	batches := p2(']', '(', 'K', 1, 'K', 2, 'e', '(', 'K', 3, 'e')
	batches = pickletest.NewWriter().BeginDict().String("entries").Raw(batches[2 : len(batches)-1]...).EndDict().Bytes()
	var ints []int64
	_, err = DecodeWithOptions(batches, Options{StreamKey: "entries", Stream: func(item any) error {
		ints = append(ints, item.(int64))
		return nil
	}})
	require.NoError(t, err)
	assert.Equal(t, []int64{1, 2, 3}, ints)

	// A list under another key, or deeper, is not streamed.
	other := pickletest.NewWriter().BeginDict().String("pg_config").BeginList().BeginDict().String("entries").BeginList().Int(1).EndList().EndDict().EndList().EndDict().Bytes()
	called := false
	_, err = DecodeWithOptions(other, Options{StreamKey: "entries", Stream: func(any) error { called = true; return nil }})
	require.NoError(t, err)
	assert.False(t, called)
}

// An error from Stream stops the decode and comes back as it is.
func TestStreamErrorStops(t *testing.T) {
	stop := errors.New("enough")
	n := 0
	_, err := DecodeWithOptions(dumpLike(100, false), Options{StreamKey: "entries", Stream: func(any) error {
		n++
		if n == 7 {
			return stop
		}
		return nil
	}})
	assert.Same(t, stop, err)
	assert.Equal(t, 7, n)
}

// Streamed entries no longer count against MaxTreeBytes, unless the memo
// keeps them: a stream whose whole tree is over the cap decodes within it
// when its entries are streamed, and not when they are memoized.
func TestStreamTreeBudget(t *testing.T) {
	data := dumpLike(2000, false)
	whole := minTree(t, data, Options{})
	streamed := minTree(t, data, Options{StreamKey: "entries", Stream: func(any) error { return nil }})
	t.Logf("2,000 entries: whole tree %d bytes, streamed %d", whole, streamed)
	assert.Less(t, streamed*4, whole, "streamed, a fraction: a slot an entry")

	memoized := dumpLike(2000, true)
	pinned := minTree(t, memoized, Options{StreamKey: "entries", Stream: func(any) error { return nil }})
	assert.GreaterOrEqual(t, pinned, minTree(t, memoized, Options{}), "memoized entries stay counted")
}

// minTree is the smallest MaxTreeBytes that decodes data under opts.
func minTree(t *testing.T, data []byte, opts Options) int64 {
	t.Helper()
	lo, hi := int64(1), int64(1<<30)
	for lo < hi {
		mid := (lo + hi) / 2
		opts.MaxTreeBytes = mid
		if _, err := DecodeWithOptions(data, opts); err == nil {
			hi = mid
		} else {
			require.ErrorIs(t, err, ErrTreeLimit, strconv.FormatInt(mid, 10))
			lo = mid + 1
		}
	}
	return lo
}
