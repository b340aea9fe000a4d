package frdump_test

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump/frdumptest"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/pickle"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/pickle/pickletest"
)

func TestParsePickleStraggler(t *testing.T) {
	d, warnings, err := frdump.Parse(readFile(t, "testdata/dp8-straggler5-v2.10/nccl_trace_rank_5"))
	require.NoError(t, err)
	assert.Empty(t, warnings)

	assert.Equal(t, frdump.Version{Major: 2, Minor: 10, Raw: "2.10"}, d.Version)
	assert.Equal(t, "2.27.3", d.CommLibVersion)
	assert.Equal(t, map[string]frdump.PGConfig{"0": {Name: "0", Desc: "default_pg", Ranks: []int{0, 1, 2, 3, 4, 5, 6, 7}}}, d.PGConfig)
	assert.Equal(t, map[string]frdump.PGStatus{"0": {LastEnqueued: 50, LastStarted: 50, LastCompleted: 50}}, d.PGStatus)
	require.Len(t, d.Entries, 50)

	assert.Equal(t, frdump.Entry{
		RecordID:                  0,
		PGID:                      0,
		PGName:                    "0",
		PGDesc:                    "default_pg",
		CollectiveSeqID:           1,
		P2PSeqID:                  0,
		OpID:                      1,
		ProfilingName:             "nccl:broadcast",
		TimeCreatedNs:             1764403200340963556,
		DurationMs:                0.029306,
		HasDuration:               true,
		InputSizes:                [][]int64{{1}},
		OutputSizes:               [][]int64{{1}},
		InputDtypes:               []string{"Float"},
		OutputDtypes:              []string{"Float"},
		State:                     frdump.StateCompleted,
		TimeDiscoveredStartedNs:   1764403200341462123,
		TimeDiscoveredCompletedNs: 1764403200341588259,
		Retired:                   true,
		TimeoutMs:                 600000,
		IsP2P:                     false,
		ThreadName:                "pt_nccl_watchdg",
		ThreadID:                  "140230000000005",
		Frames: []frdump.Frame{
			{Name: "broadcast", Filename: "torch/distributed/distributed_c10d.py", Line: 2819},
			{Name: "_allreduce_fut", Filename: "torch/distributed/algorithms/ddp_comm_hooks/default_hooks.py", Line: 28},
			{Name: "train_step", Filename: "train.py", Line: 141},
		},
	}, d.Entries[0])

	last := d.Entries[49]
	assert.Equal(t, int64(49), last.RecordID)
	assert.Equal(t, int64(50), last.CollectiveSeqID)
	assert.Equal(t, "nccl:all_reduce", last.ProfilingName)
	assert.Equal(t, int64(1764403217735510031), last.TimeCreatedNs)
	assert.Equal(t, [][]int64{{6553600}}, last.InputSizes)
	assert.Equal(t, []string{"BFloat16"}, last.OutputDtypes)
	assert.InDelta(t, 9.013704, last.DurationMs, 0)
}

func TestParsePickleHangV24(t *testing.T) {
	d, warnings, err := frdump.Parse(readFile(t, "testdata/dp4-hang2-v2.4/nccl_trace_rank_0"))
	require.NoError(t, err)
	assert.Empty(t, warnings, "2.4 has no thread_name/thread_id and no comm library version")
	assert.Equal(t, frdump.Version{Major: 2, Minor: 4, Raw: "2.4"}, d.Version)
	assert.Empty(t, d.CommLibVersion)
	assert.Equal(t, frdump.PGStatus{LastEnqueued: 19, LastStarted: 17, LastCompleted: 16}, d.PGStatus["0"])
	require.Len(t, d.Entries, 19)
	for _, e := range d.Entries {
		assert.False(t, e.HasDuration, "timing off: no duration_ms")
		assert.Zero(t, e.DurationMs)
		assert.Empty(t, e.ThreadName)
	}

	hung := d.Entries[16]
	assert.Equal(t, int64(17), hung.CollectiveSeqID)
	assert.Equal(t, frdump.StateStarted, hung.State)
	assert.Equal(t, int64(1764403203475128684), hung.TimeDiscoveredStartedNs)
	assert.Zero(t, hung.TimeDiscoveredCompletedNs, "None in the pickle")
	assert.False(t, hung.Retired)
	for _, e := range d.Entries[17:] {
		assert.Equal(t, frdump.StateScheduled, e.State)
		assert.Zero(t, e.TimeDiscoveredStartedNs)
	}

	rank2, _, err := frdump.Parse(readFile(t, "testdata/dp4-hang2-v2.4/nccl_trace_rank_2"))
	require.NoError(t, err)
	assert.Len(t, rank2.Entries, 16, "rank 2 never enqueued 17")
	assert.Equal(t, frdump.PGStatus{LastEnqueued: 16, LastStarted: 16, LastCompleted: 16}, rank2.PGStatus["0"])
}

func TestParsePickleHealthyV27(t *testing.T) {
	for _, path := range fixtures(t, "dp4-healthy-v2.7/nccl_trace_rank_*") {
		d, warnings, err := frdump.Parse(readFile(t, path))
		require.NoError(t, err, path)
		assert.Empty(t, warnings, path)
		assert.Equal(t, "2.21.5", d.CommLibVersion, "nccl_version up to 2.7")
		require.Len(t, d.Entries, 30, path)
		for _, e := range d.Entries {
			assert.True(t, e.HasDuration, path)
			assert.Equal(t, frdump.StateCompleted, e.State, path)
			assert.Len(t, e.Frames, 3, path)
		}
	}
	d, _, err := frdump.Parse(readFile(t, "testdata/dp4-healthy-v2.7/nccl_trace_rank_3"))
	require.NoError(t, err)
	assert.InDelta(t, 10.802411, d.Entries[1].DurationMs, 0)
}

func TestParsePickleTruncatedAtEveryByte(t *testing.T) {
	for _, path := range fixtures(t, "*/nccl_trace_rank_[2]") { // one per fixture set
		data := readFile(t, path)
		for i := 1; i < len(data); i++ {
			_, _, err := frdump.Parse(data[:i])
			require.ErrorIs(t, err, pickle.ErrTruncated, "%s cut at %d", path, i)
		}
	}
	// Flipped bytes give errors or dumps, never a panic.
	data := readFile(t, "testdata/dp4-hang2-v2.4/nccl_trace_rank_2")
	for i := 2; i < len(data); i++ {
		corrupt := append([]byte{}, data...)
		corrupt[i] ^= 0x5a
		_, warnings, err := frdump.Parse(corrupt)
		if err == nil {
			assert.NoError(t, kindsOnce(warnings))
		}
	}
}

func TestParsePickleRefusesCode(t *testing.T) {
	// A dump whose "version" is os.system("id"): GLOBAL then REDUCE.
	w := pickletest.NewWriter().BeginDict().String("version")
	w.Raw([]byte("cos\nsystem\n")...).String("id").Raw(0x85, 'R')
	evil := w.EndDict().Bytes()
	_, _, err := frdump.Parse(evil)
	require.ErrorIs(t, err, pickle.ErrRefused)
	assert.Equal(t, "frdump: decoding pickle: pickle: offset 18: GLOBAL (0x63 'c'): refused: "+
		"a dump must never import names, construct objects or run code", err.Error())

	// REDUCE alone, deep inside a valid dump's entries.
	d := frdumptest.Synthetic(frdumptest.SyntheticConfig{Entries: 3})
	data := frdumptest.Pickle(d)
	stop := len(data) - 1
	evil = append(append(append([]byte{}, data[:stop-3]...), 'N', 0x85, 'R'), data[stop-3:]...)
	_, _, err = frdump.Parse(evil)
	require.ErrorIs(t, err, pickle.ErrRefused)
	var perr *pickle.Error
	require.True(t, errors.As(err, &perr))
	assert.Equal(t, stop-1, perr.Offset)
}

// Torch's pickler shares each frame dict across entries through the memo;
// every entry still gets its own, complete, frames.
func TestParsePickleSharedFrames(t *testing.T) {
	want := frdumptest.Synthetic(frdumptest.SyntheticConfig{Entries: 50, Frames: 8})
	data := frdumptest.Pickle(want)
	got, _, err := frdump.Parse(data)
	require.NoError(t, err)
	assert.Equal(t, want.Entries[0].Frames, got.Entries[0].Frames)
	assert.Equal(t, want.Entries[49].Frames, got.Entries[49].Frames)
	got.Entries[0].Frames[0].Name = "changed"
	assert.NotEqual(t, "changed", got.Entries[4].Frames[0].Name, "entries do not share Frame values")
}

func FuzzParsePickle(f *testing.F) {
	for _, path := range fixtures(f, "*/nccl_trace_rank_[0-9]") {
		f.Add(readFile(f, path))
	}
	f.Add(frdumptest.Pickle(frdumptest.Synthetic(frdumptest.SyntheticConfig{Entries: 4, Frames: 3})))
	f.Add(pickletest.MemoBomb(40, 2000)) // small enough to mutate
	if !fuzzing() {
		// Issue 19's full-size bomb, 2 MB: checked on every test run, left
		// out of the mutation corpus, where each execution would take a
		// second.
		f.Add(pickletest.MemoBomb(1000, 1<<20-1))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 || data[0] != 0x80 {
			data = append([]byte{0x80}, data...)
		}
		var d *frdump.Dump
		var warnings []frdump.Warning
		var err error
		// Memory bounded by what is read: no memo reference is expanded
		// past the output budget, by the decoder or the mapper.
		if got := allocated(func() { d, warnings, err = frdump.Parse(data) }); got > allocBound(len(data)) {
			t.Fatalf("parsing %d bytes allocated %d, over %d", len(data), got, allocBound(len(data)))
		}
		// Streamed (what the receiver does), within the same bound, the
		// same entries or refused.
		var streamed []frdump.Entry
		var serr error
		if got := allocated(func() { streamed, serr = parseStreamed(data) }); got > allocBound(len(data)) {
			t.Fatalf("parsing %d bytes streamed allocated %d, over %d", len(data), got, allocBound(len(data)))
		}
		if err := sameEntries(d, err, streamed, serr); err != nil {
			t.Fatal(err)
		}
		if err != nil {
			return
		}
		if d == nil {
			t.Fatal("nil dump without an error")
		}
		if err := kindsOnce(warnings); err != nil {
			t.Fatal(err)
		}
	})
}

// parseStreamed parses data with Options.Entry, copying each entry.
func parseStreamed(data []byte) ([]frdump.Entry, error) {
	var out []frdump.Entry
	_, _, err := frdump.ParseWithOptions(data, frdump.Options{Entry: func(_, _ int, e *frdump.Entry) error {
		out = append(out, cloneEntry(e))
		return nil
	}})
	return out, err
}

// sameEntries checks the streamed parse against the whole one: a dump
// read streamed is read whole with the same entries; one refused whole is
// refused streamed. (Streamed may refuse more: an entry is sealed once the
// next value is pushed beside it, and a stream that modifies it after that
// through the memo is malformed; no pickler does that.)
func sameEntries(whole *frdump.Dump, err error, streamed []frdump.Entry, serr error) error {
	switch {
	case err != nil && serr == nil:
		return fmt.Errorf("refused whole (%v), read streamed", err)
	case serr != nil:
		return nil
	case !reflect.DeepEqual(whole.Entries, streamed) && (len(whole.Entries) > 0 || len(streamed) > 0):
		return fmt.Errorf("streamed %d entries differ from the %d read whole", len(streamed), len(whole.Entries))
	}
	return nil
}
