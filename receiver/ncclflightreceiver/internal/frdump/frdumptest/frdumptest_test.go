package frdumptest

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/pickle"
)

func TestSyntheticDefaults(t *testing.T) {
	d := Synthetic(SyntheticConfig{Rank: 2})
	assert.Equal(t, frdump.Version{Major: 2, Minor: 10, Raw: "2.10"}, d.Version)
	assert.Equal(t, []int{0, 1, 2, 3, 4, 5, 6, 7}, d.PGConfig["0"].Ranks)
	assert.Equal(t, frdump.PGStatus{LastEnqueued: 2000, LastStarted: 2000, LastCompleted: 2000}, d.PGStatus["0"])
	require.Len(t, d.Entries, 2000)
	for i, e := range d.Entries {
		assert.Equal(t, int64(i+1), e.CollectiveSeqID)
		assert.Len(t, e.Frames, 16)
		assert.True(t, e.HasDuration)
		assert.Equal(t, "140230000000002", e.ThreadID)
		if i > 0 {
			assert.Greater(t, e.TimeCreatedNs, d.Entries[i-1].TimeCreatedNs)
		}
	}
	assert.Equal(t, "nccl:broadcast", d.Entries[0].ProfilingName)
	assert.Equal(t, "nccl:all_reduce", d.Entries[1].ProfilingName)

	assert.Equal(t, d, Synthetic(SyntheticConfig{Rank: 2}), "deterministic")
	assert.NotEqual(t, d.Entries[5].TimeCreatedNs, Synthetic(SyntheticConfig{Rank: 3}).Entries[5].TimeCreatedNs, "ranks differ")

	old := Synthetic(SyntheticConfig{Version: "2.4", NoTiming: true, Entries: 5})
	assert.False(t, old.Entries[0].HasDuration)
	assert.Empty(t, old.Entries[0].ThreadName)
}

// The pickle is what torch writes: key order of dump_dict, frame dicts
// written once and fetched from the memo after, None for unknown times.
func TestPickleLayout(t *testing.T) {
	d := Synthetic(SyntheticConfig{Entries: 2, Frames: 2})
	d.Entries[1].TimeDiscoveredCompletedNs = 0
	d.Entries[1].Frames = []frdump.Frame{d.Entries[0].Frames[1]}
	data := Pickle(d)

	assert.Equal(t, 1, bytes.Count(data, []byte("site-packages/trainer/module_1.py")), "strings are memoized")
	v, err := pickle.DecodeWithOptions(data, pickle.Options{})
	require.NoError(t, err)
	top := v.(*pickle.Dict)
	var keys []string
	for _, it := range top.Items {
		keys = append(keys, it.Key.(string))
	}
	assert.Equal(t, []string{"version", "pg_config", "comm_lib_version", "pg_status", "entries"}, keys)

	entries, _ := top.Get("entries")
	e0, e1 := entries.([]any)[0].(*pickle.Dict), entries.([]any)[1].(*pickle.Dict)
	f0, _ := e0.Get("frames")
	f1, _ := e1.Get("frames")
	assert.Same(t, f0.([]any)[1].(*pickle.Dict), f1.([]any)[0].(*pickle.Dict), "a frame shown twice is one memoized dict")
	completed, ok := e1.Get("time_discovered_completed_ns")
	assert.True(t, ok)
	assert.Nil(t, completed)
	pg, _ := e0.Get("process_group")
	assert.Equal(t, pickle.Tuple{"0", "default_pg"}, pg)
	created, _ := e0.Get("time_created_ns")
	assert.Equal(t, d.Entries[0].TimeCreatedNs, created)

	older := Synthetic(SyntheticConfig{Entries: 1, Version: "2.7"})
	v, err = pickle.DecodeWithOptions(Pickle(older), pickle.Options{})
	require.NoError(t, err)
	version, _ := v.(*pickle.Dict).Get("nccl_version")
	assert.Equal(t, "2.21.5", version, "nccl_version before 2.10")
	e := first(t, v)
	_, hasThread := e.Get("thread_name")
	assert.False(t, hasThread, "no thread_name before 2.10")
}

func first(t *testing.T, v any) *pickle.Dict {
	entries, ok := v.(*pickle.Dict).Get("entries")
	require.True(t, ok)
	return entries.([]any)[0].(*pickle.Dict)
}

func TestJSONLayout(t *testing.T) {
	d := Synthetic(SyntheticConfig{Entries: 1})
	d.Entries[0].TimeDiscoveredStartedNs = 0
	js, err := JSON(d)
	require.NoError(t, err)
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	require.NoError(t, dec.Decode(&doc))

	assert.Equal(t, "2.27.3", doc["comm_lib_version"])
	assert.Equal(t, map[string]any{"0": map[string]any{
		"last_enqueued_collective": "1", "last_started_collective": "1", "last_completed_collective": "1",
	}}, doc["pg_status"], "pg_status values are strings")
	e := doc["entries"].([]any)[0].(map[string]any)
	assert.Equal(t, []any{"0", "default_pg"}, e["process_group"])
	assert.Equal(t, json.Number("0"), e["time_discovered_started_ns"], "unknown times are 0")
	assert.NotContains(t, e, "frames")

	empty := &frdump.Dump{Version: frdump.Version{Major: 2, Minor: 10, Raw: "2.10"}}
	js, err = JSON(empty)
	require.NoError(t, err)
	assert.JSONEq(t, `{"version":"2.10","comm_lib_version":"","pg_config":{},"pg_status":{}}`, string(js), "entries omitted when empty")

	d.Entries[0].DurationMs = math.NaN()
	_, err = JSON(d)
	assert.ErrorContains(t, err, "frdumptest: encoding JSON")
}

func TestRanksString(t *testing.T) {
	assert.Equal(t, "[0, 1, 2]", RanksString([]int{0, 1, 2}))
	assert.Equal(t, "[]", RanksString(nil))
}
