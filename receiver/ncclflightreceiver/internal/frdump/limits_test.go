package frdump_test

import (
	"bytes"
	"flag"
	"runtime"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump/frdumptest"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/pickle"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/pickle/pickletest"
)

// Allocation bound of one Parse: the pickle decoder's (some tens of bytes
// per input byte) plus the mapped Dump, which is charged against the output
// budget of pickle.DefaultOutputBytesPerInputByte (64) bytes per input
// byte; encoding/json allocates some 15 bytes per byte of JSON. The slack
// covers the decoder's slabs and the mapper's arenas.
const (
	allocBytesPerInputByte = 256
	allocSlackBytes        = 1 << 20
)

func allocBound(n int) uint64 { return uint64(allocBytesPerInputByte*n + allocSlackBytes) }

// allocated is what f allocated, from runtime.MemStats.TotalAlloc.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// fuzzing reports whether the test binary runs with -test.fuzz.
func fuzzing() bool {
	fl := flag.Lookup("test.fuzz")
	return fl != nil && fl.Value.String() != ""
}

// Issue 19's memo bomb: 1,000 entries share one 1,048,575-item frames list
// (2 MB). Refused by the decoder's output budget, with a bounded
// allocation, and the error names the limit.
func TestParseMemoBombRefused(t *testing.T) {
	data := pickletest.MemoBomb(1000, 1<<20-1)
	var err error
	got := allocated(func() { _, _, err = frdump.Parse(data) })
	require.ErrorIs(t, err, pickle.ErrLimit)
	assert.ErrorContains(t, err, "frdump: decoding pickle: ")
	assert.ErrorContains(t, err, "expand to more than the 134217728-byte output budget (the smaller of MaxOutputBytes")
	assert.LessOrEqual(t, got, allocBound(len(data)))
}

// A bomb the decoder accepts (each reference is cheap in the decoded tree)
// but that would map to far more than it is: 20,000 references to one
// empty entry dict, 5 bytes each, would be 20,000 Entry values.
func TestParseMapperChargesEntries(t *testing.T) {
	w := pickletest.NewWriter().BeginDict().String("version").String("2.10").String("entries").BeginList()
	w.BeginDict().EndDict()
	id := w.Memo()
	for range 20000 - 1 {
		w.Get(id)
	}
	data := w.EndList().EndDict().Bytes()
	var err error
	got := allocated(func() { _, _, err = frdump.Parse(data) })
	require.ErrorIs(t, err, frdump.ErrLimit)
	assert.ErrorContains(t, err, "frdump: dump over a limit: entries: the mapped dump needs more than its ")
	assert.LessOrEqual(t, got, allocBound(len(data)))

	// With a budget of its real cost it is read: 20,000 empty entries.
	d, _, err := frdump.ParseWithOptions(data, frdump.Options{Pickle: pickle.Options{OutputBytesPerInputByte: 1 << 10}})
	require.NoError(t, err)
	assert.Len(t, d.Entries, 20000)
}

func TestParseMaxEntries(t *testing.T) {
	d := frdumptest.Synthetic(frdumptest.SyntheticConfig{Entries: 11})
	for name, in := range map[string][]byte{"pickle": frdumptest.Pickle(d), "JSON": mustJSON(t, d)} {
		_, _, err := frdump.ParseWithOptions(in, frdump.Options{MaxEntries: 10})
		require.ErrorIs(t, err, frdump.ErrLimit, name)
		assert.EqualError(t, err, "frdump: dump over a limit: entries: 11 entries, limit 10 (MaxEntries)", name)
		got, _, err := frdump.ParseWithOptions(in, frdump.Options{MaxEntries: 11})
		require.NoError(t, err, name)
		assert.Len(t, got.Entries, 11, name)
	}
}

// The default size limits depend on the form: JSON is larger for the
// same dump.
func TestParseDefaultSizeLimits(t *testing.T) {
	pad := func(in []byte, n int) []byte { // white space after the dump
		return append(append([]byte{}, in...), bytes.Repeat([]byte{' '}, n-len(in))...)
	}
	d := frdumptest.Synthetic(frdumptest.SyntheticConfig{Entries: 10})
	js := mustJSON(t, d)
	_, _, err := frdump.Parse(pad(js, frdump.DefaultMaxJSONBytes))
	require.NoError(t, err)
	_, _, err = frdump.Parse(pad(js, frdump.DefaultMaxJSONBytes+1))
	require.ErrorIs(t, err, frdump.ErrTooLarge)
	assert.EqualError(t, err, "frdump: dump over the size limit: 12582913 bytes, limit 12582912 (MaxBytes)")

	pk := frdumptest.Pickle(d)
	_, _, err = frdump.Parse(append(pk, make([]byte, frdump.DefaultMaxPickleBytes-len(pk)+1)...))
	require.ErrorIs(t, err, frdump.ErrTooLarge)
	assert.EqualError(t, err, "frdump: dump over the size limit: 8388609 bytes, limit 8388608 (MaxBytes)")
}

func TestParseMaxFramesPerEntry(t *testing.T) {
	want := frdumptest.Synthetic(frdumptest.SyntheticConfig{Entries: 6, Frames: 8})
	data := frdumptest.Pickle(want)
	got, warnings, err := frdump.ParseWithOptions(data, frdump.Options{MaxFramesPerEntry: 5})
	require.NoError(t, err)
	for i := range got.Entries {
		assert.Equal(t, want.Entries[i].Frames[:5], got.Entries[i].Frames, i)
	}
	require.Len(t, warnings, 1)
	assert.Equal(t, frdump.WarnTruncatedFrames, warnings[0].Kind)
	assert.Equal(t, "frdump: 6 of 6 entries have more than 5 frames (MaxFramesPerEntry), kept the first 5", warnings[0].Message)

	got, warnings, err = frdump.ParseWithOptions(data, frdump.Options{MaxFramesPerEntry: 8})
	require.NoError(t, err)
	assert.Empty(t, warnings)
	assert.Equal(t, want.Entries[5].Frames, got.Entries[5].Frames)
}

// Groups that share a ranks string share one parse: the string is not
// parsed again per group, and the groups share the result.
func TestParseRanksParsedOnce(t *testing.T) {
	doc := docOf(t, frdumptest.Synthetic(frdumptest.SyntheticConfig{Entries: 1}))
	groups := doc["pg_config"].(map[string]any)
	for i := range 50 {
		name := strconv.Itoa(i + 1)
		groups[name] = map[string]any{"name": name, "desc": "sub", "ranks": "[0, 1, 2, 3]"}
	}
	for form, in := range forms(t, doc) {
		d, warnings, err := frdump.Parse(in)
		require.NoError(t, err, form)
		assert.Empty(t, warnings, form)
		require.Equal(t, []int{0, 1, 2, 3}, d.PGConfig["1"].Ranks, form)
		for i := range 50 {
			ranks := d.PGConfig[strconv.Itoa(i+1)].Ranks
			assert.Same(t, &d.PGConfig["1"].Ranks[0], &ranks[0], "%s group %d", form, i+1)
		}
	}
}

func TestParseMaxRanksPerGroup(t *testing.T) {
	doc := docOf(t, frdumptest.Synthetic(frdumptest.SyntheticConfig{Entries: 1}))
	doc["pg_config"].(map[string]any)["0"].(map[string]any)["ranks"] = "[0, 1, 2]"
	for form, in := range forms(t, doc) {
		d, warnings, err := frdump.ParseWithOptions(in, frdump.Options{MaxRanksPerGroup: 2})
		require.NoError(t, err, form)
		assert.Nil(t, d.PGConfig["0"].Ranks, form)
		require.Len(t, warnings, 1, form)
		assert.Equal(t, frdump.WarnUnparsableRanks, warnings[0].Kind, form)
		assert.Contains(t, warnings[0].Message, "not a list of at most 2 ranks", form)
		d, _, err = frdump.ParseWithOptions(in, frdump.Options{MaxRanksPerGroup: 3})
		require.NoError(t, err, form)
		assert.Equal(t, []int{0, 1, 2}, d.PGConfig["0"].Ranks, form)
	}
}

// Large honest dumps are read with the default Options: 20,000 entries
// (10 times torch's default ring buffer) with 16 frames each, in both
// forms, and 64 frames each in pickle.
func TestParseLargeHonestDumps(t *testing.T) {
	big := frdumptest.Synthetic(frdumptest.SyntheticConfig{Entries: frdump.DefaultMaxEntries, Frames: 16})
	deep := frdumptest.Synthetic(frdumptest.SyntheticConfig{Entries: frdump.DefaultMaxEntries / 2, Frames: frdump.DefaultMaxFramesPerEntry})
	for name, in := range map[string][]byte{
		"pickle 20000x16": frdumptest.Pickle(big),
		"pickle 10000x64": frdumptest.Pickle(deep),
		"JSON 20000":      mustJSON(t, big),
	} {
		var d *frdump.Dump
		var err error
		got := allocated(func() { d, _, err = frdump.Parse(in) })
		require.NoError(t, err, name)
		assert.NotEmpty(t, d.Entries, name)
		assert.LessOrEqual(t, got, allocBound(len(in)), name)
	}
}
