package frdump_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump/frdumptest"
)

// Each rank's JSON form decodes to the same Dump as its pickle, frames
// aside: process_group list vs tuple, 0 vs None, pg_status strings vs ints.
func TestParseJSONEqualsPickle(t *testing.T) {
	paths := fixtures(t, "*/nccl_trace_rank_*.json")
	require.Len(t, paths, 8)
	for _, jsonPath := range paths {
		fromJSON, warnings, err := frdump.Parse(readFile(t, jsonPath))
		require.NoError(t, err, jsonPath)
		assert.Empty(t, warnings, jsonPath)

		fromPickle, warnings, err := frdump.Parse(readFile(t, strings.TrimSuffix(jsonPath, ".json")))
		require.NoError(t, err, jsonPath)
		assert.Empty(t, warnings, jsonPath)

		require.Len(t, fromPickle.Entries, 50, jsonPath)
		assert.Len(t, fromPickle.Entries[0].Frames, 3, jsonPath)
		assert.Equal(t, withoutFrames(fromPickle), fromJSON, jsonPath)
	}
	// The pickle-only fixtures, through frdumptest's JSON writer, too.
	for _, path := range fixtures(t, "dp4-*/nccl_trace_rank_*") {
		fromPickle, _, err := frdump.Parse(readFile(t, path))
		require.NoError(t, err, path)
		fromJSON, warnings, err := frdump.Parse(mustJSON(t, fromPickle))
		require.NoError(t, err, path)
		assert.Empty(t, warnings, path)
		assert.Equal(t, withoutFrames(fromPickle), fromJSON, filepath.Base(path))
	}
}

func TestParseJSONForm(t *testing.T) {
	// What dump_json writes when nothing was recorded: no entries key.
	d, warnings, err := frdump.Parse([]byte(`{"comm_lib_version":"2.27.3","pg_config":{},"pg_status":{},"version":"2.10"}`))
	require.NoError(t, err)
	assert.Empty(t, warnings)
	assert.Empty(t, d.Entries)
	assert.Equal(t, "2.27.3", d.CommLibVersion)

	// ns timestamps keep every digit (a float64 would round them).
	d, _, err = frdump.Parse([]byte(`{"version":"2.10","pg_config":{},"pg_status":{"3":{"last_enqueued_collective":"-1",` +
		`"last_started_collective":"-1","last_completed_collective":"-1"}},"entries":[{"time_created_ns":1764403200340963557,` +
		`"time_discovered_started_ns":0,"duration_ms":null}]}`))
	require.NoError(t, err)
	assert.Equal(t, int64(1764403200340963557), d.Entries[0].TimeCreatedNs)
	assert.False(t, d.Entries[0].HasDuration)
	assert.Equal(t, frdump.PGStatus{LastEnqueued: -1, LastStarted: -1, LastCompleted: -1}, d.PGStatus["3"])
}

func TestParseJSONCorrupt(t *testing.T) {
	data := readFile(t, "testdata/dp8-straggler5-v2.10/nccl_trace_rank_5.json")
	for i := 1; i < len(data)-1; i += 7 {
		_, _, err := frdump.Parse(data[:i])
		require.Error(t, err, "cut at %d", i)
		assert.Contains(t, err.Error(), "frdump: decoding JSON", "cut at %d", i)
	}
	_, _, err := frdump.Parse(append(append([]byte{}, data...), []byte(`{"version":"2.10"}`)...))
	assert.EqualError(t, err, "frdump: decoding JSON: data after the top-level object at offset 36762")

	_, _, err = frdump.Parse([]byte(`{"entries": [1e999]}`))
	assert.ErrorContains(t, err, "entries[0]: want a dict, got a float")
}

func FuzzParseJSON(f *testing.F) {
	for _, path := range fixtures(f, "*/nccl_trace_rank_*.json") {
		f.Add(readFile(f, path))
	}
	js, err := frdumptest.JSON(frdumptest.Synthetic(frdumptest.SyntheticConfig{Entries: 3, Version: "2.4"}))
	require.NoError(f, err)
	f.Add(js)
	f.Add([]byte(`{"version":"2.11","entries":[{"process_group":["0"],"frames":[{"line":"x"}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		in := append([]byte("{"), data...)
		var d *frdump.Dump
		var warnings []frdump.Warning
		var err error
		if got := allocated(func() { d, warnings, err = frdump.Parse(in) }); got > allocBound(len(in)) {
			t.Fatalf("parsing %d bytes allocated %d, over %d", len(in), got, allocBound(len(in)))
		}
		var streamed []frdump.Entry
		var serr error
		if got := allocated(func() { streamed, serr = parseStreamed(in) }); got > allocBound(len(in)) {
			t.Fatalf("parsing %d bytes streamed allocated %d, over %d", len(in), got, allocBound(len(in)))
		}
		if (err == nil) != (serr == nil) {
			t.Fatalf("whole: %v; streamed: %v", err, serr)
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
		if _, err := json.Marshal(d.Version); err != nil {
			t.Fatal(err)
		}
	})
}
