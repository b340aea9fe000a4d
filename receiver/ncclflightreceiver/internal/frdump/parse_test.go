package frdump_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump/frdumptest"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/pickle/pickletest"
)

func TestParseDispatchesOnFirstByte(t *testing.T) {
	d := frdumptest.Synthetic(frdumptest.SyntheticConfig{Entries: 3})
	js := mustJSON(t, d)

	for name, in := range map[string][]byte{
		"pickle":                    frdumptest.Pickle(d),
		"JSON":                      js,
		"JSON after white space":    append([]byte(" \r\n\t"), js...),
		"JSON after a UTF-8 BOM":    append([]byte("\xef\xbb\xbf\n"), js...),
		"JSON with a trailing line": append(slices.Clone(js), '\n'),
	} {
		got, warnings, err := frdump.Parse(in)
		require.NoError(t, err, name)
		assert.Empty(t, warnings, name)
		assert.Len(t, got.Entries, 3, name)
	}

	for name, in := range map[string][]byte{
		"empty":                  nil,
		"only white space":       []byte("  \n"),
		"a JSON list":            []byte(`[{"version": "2.10"}]`),
		"text":                   []byte("version: 2.10"),
		"protocol 1 pickle":      {'}', '.'},
		"white space and pickle": append([]byte(" "), frdumptest.Pickle(d)...),
	} {
		_, _, err := frdump.Parse(in)
		assert.ErrorIs(t, err, frdump.ErrUnknownFormat, name)
	}
}

func TestParseSizeLimit(t *testing.T) {
	d := frdumptest.Synthetic(frdumptest.SyntheticConfig{Entries: 10})
	for name, in := range map[string][]byte{"pickle": frdumptest.Pickle(d), "JSON": mustJSON(t, d)} {
		_, _, err := frdump.ParseWithOptions(in, frdump.Options{MaxBytes: len(in) - 1})
		require.ErrorIs(t, err, frdump.ErrTooLarge, name)
		_, _, err = frdump.ParseWithOptions(in, frdump.Options{MaxBytes: len(in)})
		require.NoError(t, err, name)
	}
}

// Dumps generated in Go, in each schema version, come back the same from
// both forms (less frames, which JSON lacks).
func TestParseRoundTripsGeneratedDumps(t *testing.T) {
	for _, cfg := range []frdumptest.SyntheticConfig{
		{Version: "2.10", Entries: 300, Frames: 5},
		{Version: "2.7", Entries: 40},
		{Version: "2.4", Entries: 40, NoTiming: true, Rank: 3, WorldSize: 4},
	} {
		want := frdumptest.Synthetic(cfg)

		got, warnings, err := frdump.Parse(frdumptest.Pickle(want))
		require.NoError(t, err, cfg.Version)
		assert.Empty(t, warnings, cfg.Version)
		assert.Equal(t, want, got, cfg.Version)

		got, warnings, err = frdump.Parse(mustJSON(t, want))
		require.NoError(t, err, cfg.Version)
		assert.Empty(t, warnings, cfg.Version)
		assert.Equal(t, withoutFrames(want), got, cfg.Version)
	}
}

func TestParseComparesVersionsAsIntegers(t *testing.T) {
	v210, err := frdump.ParseVersion("2.10")
	require.NoError(t, err)
	v29, err := frdump.ParseVersion("2.9")
	require.NoError(t, err)
	assert.True(t, v29.Less(v210))
	assert.False(t, v210.Less(v29))

	// thread_name/thread_id are required from 2.10 on, not in 2.9: a
	// string comparison ("2.10" < "2.9") would get both cases wrong.
	doc := docOf(t, frdumptest.Synthetic(frdumptest.SyntheticConfig{Entries: 2}))
	for _, e := range doc["entries"].([]any) {
		delete(e.(map[string]any), "thread_name")
		delete(e.(map[string]any), "thread_id")
	}
	for form, in := range forms(t, doc) {
		_, warnings, err := frdump.Parse(in)
		require.NoError(t, err, form)
		require.Len(t, warnings, 1, form)
		assert.Equal(t, frdump.WarnMissingFields, warnings[0].Kind, form)
		assert.Equal(t, []string{"entries[].thread_id", "entries[].thread_name"}, warnings[0].Fields, form)
	}
	doc["version"] = "2.9"
	for form, in := range forms(t, doc) {
		d, warnings, err := frdump.Parse(in)
		require.NoError(t, err, form)
		assert.Empty(t, warnings, form)
		assert.Equal(t, frdump.Version{Major: 2, Minor: 9, Raw: "2.9"}, d.Version, form)
	}
}

func TestParseUnknownVersionWarnsOnce(t *testing.T) {
	for _, version := range []string{"2.11", "3.0", "2.2", "next", ""} {
		doc := docOf(t, frdumptest.Synthetic(frdumptest.SyntheticConfig{Entries: 20}))
		doc["version"] = version
		doc["new_top_level_key"] = "x"
		for _, e := range doc["entries"].([]any) {
			e.(map[string]any)["stack_id"] = json.Number("7") // a key this parser does not know
		}
		for form, in := range forms(t, doc) {
			d, warnings, err := frdump.Parse(in)
			require.NoError(t, err, "%s %q", form, version)
			assert.Len(t, d.Entries, 20)
			assert.Equal(t, "nccl:broadcast", d.Entries[0].ProfilingName)
			assert.Equal(t, version, d.Version.Raw)

			require.Len(t, warnings, 2, "%s %q: %v", form, version, warnings)
			assert.Equal(t, frdump.WarnUnknownVersion, warnings[0].Kind)
			assert.Contains(t, warnings[0].Message, strconv.Quote(version))
			assert.Equal(t, frdump.WarnUnknownFields, warnings[1].Kind)
			assert.Equal(t, []string{"entries[].stack_id", "new_top_level_key"}, warnings[1].Fields)
		}
	}
}

func TestParseMissingFieldsWarnOnce(t *testing.T) {
	doc := docOf(t, frdumptest.Synthetic(frdumptest.SyntheticConfig{Entries: 3}))
	delete(doc, "pg_status")
	entries := doc["entries"].([]any)
	delete(entries[0].(map[string]any), "timeout_ms")
	delete(entries[2].(map[string]any), "timeout_ms")
	delete(entries[2].(map[string]any), "state")
	delete(entries[1].(map[string]any), "duration_ms") // optional: no warning
	delete(doc["pg_config"].(map[string]any)["0"].(map[string]any), "desc")

	for form, in := range forms(t, doc) {
		d, warnings, err := frdump.Parse(in)
		require.NoError(t, err, form)
		require.Len(t, warnings, 1, form)
		w := warnings[0]
		assert.Equal(t, frdump.WarnMissingFields, w.Kind)
		assert.Equal(t, []string{"entries[].state", "entries[].timeout_ms", "pg_config[].desc", "pg_status"}, w.Fields)
		assert.Equal(t, `frdump: version "2.10" dump lacks fields, left at zero values: pg_config[].desc, pg_status, `+
			`entries[].state (in 1 of 3 entries), entries[].timeout_ms (in 2 of 3 entries)`, w.Message)

		assert.Zero(t, d.Entries[0].TimeoutMs)
		assert.Equal(t, int64(600000), d.Entries[1].TimeoutMs)
		assert.Empty(t, d.Entries[2].State)
		assert.False(t, d.Entries[1].HasDuration)
		assert.Nil(t, d.PGStatus)
		assert.Empty(t, d.PGConfig["0"].Desc)
	}
}

func TestParseWrongTypesNameKeyAndEntry(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(doc map[string]any)
		want   string
	}{
		{"time_created_ns a string", func(doc map[string]any) {
			entry(doc, 1)["time_created_ns"] = "yesterday"
		}, "frdump: entries[1].time_created_ns: want an integer, got a string"},
		{"state an integer", func(doc map[string]any) {
			entry(doc, 2)["state"] = json.Number("3")
		}, "frdump: entries[2].state: want a string, got an integer"},
		{"process_group of three", func(doc map[string]any) {
			entry(doc, 0)["process_group"] = []any{"0", "default_pg", "x"}
		}, "frdump: entries[0].process_group: want a (name, desc) pair of strings, got a list"},
		{"float size", func(doc map[string]any) {
			entry(doc, 0)["input_sizes"] = []any{[]any{json.Number("1.5")}}
		}, "frdump: entries[0].input_sizes: want a list of lists of integers, got a list"},
		{"frames not a list", func(doc map[string]any) {
			entry(doc, 1)["frames"] = "main.py:1"
		}, "frdump: entries[1].frames: want a list, got a string"},
		{"frame line a string", func(doc map[string]any) {
			entry(doc, 1)["frames"] = []any{map[string]any{"name": "f", "filename": "a.py", "line": "12"}}
		}, "frdump: entries[1].frames[0].line: want an integer, got a string"},
		{"frame not a dict", func(doc map[string]any) {
			entry(doc, 1)["frames"] = []any{"f"}
		}, "frdump: entries[1].frames[0]: want a dict, got a string"},
		{"entry not a dict", func(doc map[string]any) {
			doc["entries"].([]any)[2] = json.Number("5")
		}, "frdump: entries[2]: want a dict, got an integer"},
		{"retired None", func(doc map[string]any) {
			entry(doc, 0)["retired"] = nil
		}, "frdump: entries[0].retired: want a bool, got None/null"},
		{"entries a dict", func(doc map[string]any) {
			doc["entries"] = map[string]any{}
		}, "frdump: entries: want a list, got a dict"},
		{"version a number", func(doc map[string]any) {
			doc["version"] = json.Number("2.1")
		}, "frdump: version: want a string, got a float"},
		{"pg_status not a number", func(doc map[string]any) {
			doc["pg_status"].(map[string]any)["0"].(map[string]any)["last_started_collective"] = "soon"
		}, `frdump: pg_status["0"].last_started_collective: want an integer, got a string`},
		{"pg_config name a list", func(doc map[string]any) {
			doc["pg_config"].(map[string]any)["0"].(map[string]any)["name"] = []any{}
		}, `frdump: pg_config["0"].name: want a string, got a list`},
		{"comm_lib_version a bool", func(doc map[string]any) {
			doc["comm_lib_version"] = true
		}, "frdump: comm_lib_version: want a string, got a bool"},
	}
	for _, tt := range tests {
		doc := docOf(t, frdumptest.Synthetic(frdumptest.SyntheticConfig{Entries: 3, Frames: 1}))
		tt.mutate(doc)
		for form, in := range forms(t, doc) {
			_, _, err := frdump.Parse(in)
			var fe *frdump.FieldError
			require.ErrorAs(t, err, &fe, "%s %s", form, tt.name)
			assert.Equal(t, tt.want, err.Error(), "%s %s", form, tt.name)
		}
	}

	_, _, err := frdump.Parse([]byte(`{"entries": [], "pg_config": {"0": 5}}`))
	assert.EqualError(t, err, `frdump: pg_config["0"]: want a dict, got an integer`)
	_, _, err = frdump.Parse(pickletest.NewWriter().BeginList().EndList().Bytes())
	assert.EqualError(t, err, "frdump: (top level): want a dict, got a list")
	_, _, err = frdump.Parse(pickletest.NewWriter().BeginDict().Int(1).Int(2).EndDict().Bytes())
	assert.EqualError(t, err, "frdump: (top level): want string keys, got an integer key")
}

func TestParseRanks(t *testing.T) {
	tests := []struct {
		ranks any
		want  []int
		ok    bool
	}{
		{"[0, 1, 2, 3]", []int{0, 1, 2, 3}, true},
		{"[0,1]", []int{0, 1}, true}, // torchcomms writes no spaces
		{" [ 7 ] ", []int{7}, true},
		{"[]", []int{}, true},
		{[]any{json.Number("4"), json.Number("5")}, []int{4, 5}, true},
		{"[0, x]", nil, false},
		{"0, 1", nil, false},
		{"[-1]", nil, false},
		{json.Number("3"), nil, false},
	}
	for _, tt := range tests {
		doc := docOf(t, frdumptest.Synthetic(frdumptest.SyntheticConfig{Entries: 1}))
		doc["pg_config"].(map[string]any)["0"].(map[string]any)["ranks"] = tt.ranks
		for form, in := range forms(t, doc) {
			d, warnings, err := frdump.Parse(in)
			require.NoError(t, err)
			assert.Equal(t, tt.want, d.PGConfig["0"].Ranks, "%s %v", form, tt.ranks)
			if tt.ok {
				assert.Empty(t, warnings, "%s %v", form, tt.ranks)
				continue
			}
			require.Len(t, warnings, 1, "%s %v", form, tt.ranks)
			assert.Equal(t, frdump.WarnUnparsableRanks, warnings[0].Kind)
			assert.Equal(t, []string{`pg_config["0"].ranks`}, warnings[0].Fields)
		}
	}
}

// BenchmarkParse2000Entries decodes and maps one dump of torch's default
// ring buffer size, 16 frames per entry.
func BenchmarkParse2000Entries(b *testing.B) {
	d := frdumptest.Synthetic(frdumptest.SyntheticConfig{Entries: 2000, Frames: 16})
	js, err := frdumptest.JSON(d)
	require.NoError(b, err)
	for form, in := range map[string][]byte{"pickle": frdumptest.Pickle(d), "json": js} {
		b.Run(form, func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			for b.Loop() {
				got, _, err := frdump.Parse(in)
				if err != nil || len(got.Entries) != 2000 {
					b.Fatalf("parse: %v", err)
				}
			}
		})
	}
}

// ---- helpers shared by this package's tests ----

func mustJSON(tb testing.TB, d *frdump.Dump) []byte {
	js, err := frdumptest.JSON(d)
	require.NoError(tb, err)
	return js
}

func withoutFrames(d *frdump.Dump) *frdump.Dump {
	c := *d
	c.Entries = slices.Clone(d.Entries)
	for i := range c.Entries {
		c.Entries[i].Frames = nil
	}
	return &c
}

// docOf is d's JSON form as generic values, to mutate (it has no frames;
// the parser maps frames the same way in both forms).
func docOf(tb testing.TB, d *frdump.Dump) map[string]any {
	dec := json.NewDecoder(bytes.NewReader(mustJSON(tb, d)))
	dec.UseNumber()
	var doc map[string]any
	require.NoError(tb, dec.Decode(&doc))
	return doc
}

func entry(doc map[string]any, i int) map[string]any {
	return doc["entries"].([]any)[i].(map[string]any)
}

// forms renders a generic document in both forms: JSON as it is, and a
// pickle written the way torch's pickler writes (keys sorted, so that
// failures are the same from run to run).
func forms(tb testing.TB, doc map[string]any) map[string][]byte {
	js, err := json.Marshal(doc)
	require.NoError(tb, err)
	w := pickletest.NewWriter()
	writeGeneric(tb, w, doc)
	return map[string][]byte{"JSON": js, "pickle": w.Bytes()}
}

func writeGeneric(tb testing.TB, w *pickletest.Writer, v any) {
	switch x := v.(type) {
	case nil:
		w.None()
	case bool:
		w.Bool(x)
	case string:
		w.String(x)
	case json.Number:
		if n, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			w.Int(n)
		} else {
			f, err := strconv.ParseFloat(string(x), 64)
			require.NoError(tb, err)
			w.Float(f)
		}
	case []any:
		w.BeginList()
		for _, it := range x {
			writeGeneric(tb, w, it)
		}
		w.EndList()
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		w.BeginDict()
		for _, k := range keys {
			w.String(k)
			writeGeneric(tb, w, x[k])
		}
		w.EndDict()
	default:
		tb.Fatalf("writeGeneric: unexpected %T", v)
	}
}

func readFile(tb testing.TB, path string) []byte {
	data, err := os.ReadFile(path)
	require.NoError(tb, err)
	return data
}

func fixtures(tb testing.TB, pattern string) []string {
	paths, err := filepath.Glob(filepath.Join("testdata", pattern))
	require.NoError(tb, err)
	require.NotEmpty(tb, paths, pattern)
	return paths
}

// kindsOnce checks that no warning kind repeats.
func kindsOnce(warnings []frdump.Warning) error {
	seen := map[frdump.WarningKind]bool{}
	for _, w := range warnings {
		if seen[w.Kind] {
			return errors.New("warning kind " + string(w.Kind) + " reported twice")
		}
		seen[w.Kind] = true
	}
	return nil
}
