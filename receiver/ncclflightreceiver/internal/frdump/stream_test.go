package frdump_test

import (
	"errors"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump/frdumptest"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/pickle"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/pickle/pickletest"
)

// cloneEntry copies what an Entry holds, as a caller of Options.Entry must.
func cloneEntry(e *frdump.Entry) frdump.Entry {
	c := *e
	c.InputSizes = slices.Clone(e.InputSizes)
	for i := range c.InputSizes {
		c.InputSizes[i] = slices.Clone(c.InputSizes[i])
	}
	c.OutputSizes = slices.Clone(e.OutputSizes)
	for i := range c.OutputSizes {
		c.OutputSizes[i] = slices.Clone(c.OutputSizes[i])
	}
	c.InputDtypes, c.OutputDtypes = slices.Clone(e.InputDtypes), slices.Clone(e.OutputDtypes)
	c.Frames = slices.Clone(e.Frames)
	return c
}

// Options.Entry hands over the same entries, in order, that Dump.Entries
// holds without it, in both forms; the Dump keeps the rest.
func TestParseStreamsEntries(t *testing.T) {
	d := frdumptest.Synthetic(frdumptest.SyntheticConfig{Entries: 300})
	js, err := frdumptest.JSON(d)
	require.NoError(t, err)
	for name, c := range map[string]struct {
		in []byte
		n  int
	}{"pickle": {frdumptest.Pickle(d), -1}, "json": {js, -1}} { // both read as a stream: the count is not known before
		whole, wholeWarnings, err := frdump.Parse(c.in)
		require.NoError(t, err, name)
		var got []frdump.Entry
		streamed, warnings, err := frdump.ParseWithOptions(c.in, frdump.Options{Entry: func(i, n int, e *frdump.Entry) error {
			assert.Equal(t, len(got), i, name)
			assert.Equal(t, c.n, n, name)
			got = append(got, cloneEntry(e))
			return nil
		}})
		require.NoError(t, err, name)
		assert.Nil(t, streamed.Entries, name)
		assert.Equal(t, whole.Entries, got, name)
		assert.Equal(t, wholeWarnings, warnings, name)
		streamed.Entries = whole.Entries
		assert.Equal(t, whole, streamed, name)

		stop := errors.New("enough")
		calls := 0
		_, _, err = frdump.ParseWithOptions(c.in, frdump.Options{Entry: func(int, int, *frdump.Entry) error {
			calls++
			if calls == 10 {
				return stop
			}
			return nil
		}})
		assert.ErrorIs(t, err, stop, name)
		assert.Equal(t, 10, calls, name)
	}
}

// MaxTreeBytes caps a pickle's decoded tree, and the count is what its
// heap is, within the receiver's margin (105 % and 64 KiB of the decoder's
// slabs): a caller that gives a dump its share of a memory budget can
// trust it. A JSON dump is read one value
// at a time, each capped the same way.
func TestParseTreeBudget(t *testing.T) {
	for _, entries := range []int{20, 200, 2000} {
		data := frdumptest.Pickle(frdumptest.Synthetic(frdumptest.SyntheticConfig{Entries: entries}))
		lo, hi := int64(1), int64(1<<30)
		for lo < hi {
			mid := (lo + hi) / 2
			if _, err := pickle.DecodeWithOptions(data, pickle.Options{MaxTreeBytes: mid}); err == nil {
				hi = mid
			} else {
				lo = mid + 1
			}
		}
		before := liveHeap()
		v, err := pickle.DecodeWithOptions(data, pickle.Options{})
		heap := liveHeap() - before
		require.NoError(t, err)
		runtime.KeepAlive(v)
		t.Logf("%d entries: %d bytes of pickle, tree counted %d (%.1f per byte), heap %d", entries, len(data), lo, float64(lo)/float64(len(data)), heap)
		assert.LessOrEqual(t, float64(heap), 1.05*float64(lo)+64<<10, "the heap within 105 %% of the count")
		assert.GreaterOrEqual(t, float64(heap), 0.9*float64(lo), "and not far below it")

		_, _, err = frdump.ParseWithOptions(data, frdump.Options{MaxTreeBytes: lo - 1})
		require.ErrorIs(t, err, pickle.ErrTreeLimit)
		require.ErrorIs(t, err, pickle.ErrLimit)
		_, _, err = frdump.ParseWithOptions(data, frdump.Options{MaxTreeBytes: lo})
		require.NoError(t, err)

		// Streamed, the entries are never all decoded: a fraction of the
		// whole tree is enough once there are many (what the memo keeps,
		// the frames and strings, stays).
		if entries >= 2000 {
			streamed := 0
			_, _, err = frdump.ParseWithOptions(data, frdump.Options{MaxTreeBytes: lo / 8, Entry: func(int, int, *frdump.Entry) error {
				streamed++
				return nil
			}})
			require.NoError(t, err)
			assert.Equal(t, entries, streamed)
		}
	}

	// JSON: the entries fit one at a time in far less than the whole.
	d := frdumptest.Synthetic(frdumptest.SyntheticConfig{Entries: 2000})
	js, err := frdumptest.JSON(d)
	require.NoError(t, err)
	_, _, err = frdump.ParseWithOptions(js, frdump.Options{MaxTreeBytes: 4 << 10})
	require.NoError(t, err, "a %d-byte document, 4 KiB at a time", len(js))
	// One entry that holds more is refused.
	d.Entries[7].InputSizes = [][]int64{make([]int64, 1000)}
	js, err = frdumptest.JSON(d)
	require.NoError(t, err)
	_, _, err = frdump.ParseWithOptions(js, frdump.Options{MaxTreeBytes: 4 << 10})
	require.ErrorIs(t, err, pickle.ErrTreeLimit)
	assert.ErrorContains(t, err, "frdump: decoding JSON: ")
	assert.ErrorContains(t, err, "a value holds more than 4096 bytes (MaxTreeBytes)")
}

// A top-level key given twice is refused in both forms: a reader would
// have to pick one. JSON nested deeper than 64 levels is refused.
func TestParseRefusesRepeatedTopLevelKeys(t *testing.T) {
	_, _, err := frdump.Parse([]byte(`{"version": "2.10", "entries": [], "version": "2.9"}`))
	var fe *frdump.FieldError
	require.ErrorAs(t, err, &fe)
	assert.EqualError(t, err, "frdump: version: want one value, got the key repeated")
	_, _, err = frdump.Parse([]byte(`{"entries": [], "pg_status": {}, "entries": []}`))
	assert.EqualError(t, err, "frdump: entries: want one value, got the key repeated")

	twice := pickletest.NewWriter().BeginDict().
		String("pg_config").BeginDict().EndDict().
		String("pg_config").BeginDict().EndDict().
		EndDict().Bytes()
	_, _, err = frdump.Parse(twice)
	assert.EqualError(t, err, "frdump: pg_config: want one value, got the key repeated")

	deep := `{"pg_config": ` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}`
	_, _, err = frdump.Parse([]byte(deep))
	assert.ErrorContains(t, err, "frdump: decoding JSON: nesting deeper than 64")
}

func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
