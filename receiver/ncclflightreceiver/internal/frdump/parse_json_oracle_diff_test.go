package frdump_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump/frdumptest"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/pickle"
)

// The JSON decoder is a scanner over the input with a fast path for
// torch's entries (issue 32); the encoding/json decoder it replaced is
// kept as an oracle (parse_json_oracle_test.go). These tests hold the two
// to the same results, whole and streamed: the same Dump, warnings and
// entries, or an error of the same kind — the same message, but for a
// syntax error's wording and the offsets.

// outcome is what one parse gave, whole and streamed.
type outcome struct {
	dump     *frdump.Dump
	warnings []frdump.Warning
	err      error

	streamedDump     *frdump.Dump
	streamedWarnings []frdump.Warning
	streamed         []frdump.Entry
	streamedErr      error
}

type parseFunc func([]byte, frdump.Options) (*frdump.Dump, []frdump.Warning, error)

func parseBoth(parse parseFunc, in []byte, opts frdump.Options) outcome {
	var o outcome
	o.dump, o.warnings, o.err = parse(in, opts)
	opts.Entry = func(i, n int, e *frdump.Entry) error {
		if i != len(o.streamed) || n != -1 {
			return fmt.Errorf("entry %d of %d handed over after %d", i, n, len(o.streamed))
		}
		o.streamed = append(o.streamed, cloneEntry(e))
		return nil
	}
	o.streamedDump, o.streamedWarnings, o.streamedErr = parse(in, opts)
	return o
}

// matchOracle parses in with both decoders and says how they differ.
func matchOracle(in []byte, opts frdump.Options) error {
	got := parseBoth(frdump.ParseWithOptions, in, opts)
	want := parseBoth(frdump.ParseWithOracle, in, opts)
	if err := sameError(got.err, want.err); err != nil {
		return fmt.Errorf("whole: %w", err)
	}
	if err := sameError(got.streamedErr, want.streamedErr); err != nil {
		return fmt.Errorf("streamed: %w", err)
	}
	if got.err == nil {
		if !reflect.DeepEqual(got.dump, want.dump) {
			return fmt.Errorf("whole: dumps differ:\n got %+v\nwant %+v", got.dump, want.dump)
		}
		if !reflect.DeepEqual(got.warnings, want.warnings) {
			return fmt.Errorf("whole: warnings differ:\n got %v\nwant %v", got.warnings, want.warnings)
		}
	}
	if got.streamedErr == nil {
		if !reflect.DeepEqual(got.streamedDump, want.streamedDump) {
			return fmt.Errorf("streamed: dumps differ:\n got %+v\nwant %+v", got.streamedDump, want.streamedDump)
		}
		if !reflect.DeepEqual(got.streamedWarnings, want.streamedWarnings) {
			return fmt.Errorf("streamed: warnings differ:\n got %v\nwant %v", got.streamedWarnings, want.streamedWarnings)
		}
	}
	// Entries handed over before an error, too.
	if !reflect.DeepEqual(got.streamed, want.streamed) {
		return fmt.Errorf("streamed: entries differ: got %d, want %d:\n got %+v\nwant %+v", len(got.streamed), len(want.streamed), got.streamed, want.streamed)
	}
	return nil
}

var offsetRE = regexp.MustCompile(` at offset \d+`)

// syntaxError reports whether err is a JSON syntax error, whose wording
// may differ (encoding/json's decoder has its own).
func syntaxError(err error) bool {
	msg := err.Error()
	return strings.HasPrefix(msg, "frdump: decoding JSON: ") && !errors.Is(err, pickle.ErrTreeLimit) &&
		!strings.Contains(msg, "nesting deeper than") && !strings.Contains(msg, "data after the top-level object")
}

// sameError: both nil, or both errors of the same kind with the same
// message but for the offsets (and, for syntax errors, the wording).
func sameError(got, want error) error {
	if (got == nil) != (want == nil) {
		return fmt.Errorf("error %v, oracle's %v", got, want)
	}
	if got == nil {
		return nil
	}
	for _, target := range []error{pickle.ErrTreeLimit, pickle.ErrLimit, frdump.ErrLimit, frdump.ErrTooLarge, frdump.ErrUnknownFormat, io.ErrUnexpectedEOF} {
		if errors.Is(got, target) != errors.Is(want, target) {
			return fmt.Errorf("error %q, oracle's %q: errors.Is %v differs", got, want, target)
		}
	}
	var fe1, fe2 *frdump.FieldError
	if errors.As(got, &fe1) != errors.As(want, &fe2) {
		return fmt.Errorf("error %q, oracle's %q: one a FieldError", got, want)
	}
	if syntaxError(got) != syntaxError(want) {
		return fmt.Errorf("error %q, oracle's %q: one a syntax error", got, want)
	}
	if !syntaxError(want) && offsetRE.ReplaceAllString(got.Error(), "") != offsetRE.ReplaceAllString(want.Error(), "") {
		return fmt.Errorf("error %q, oracle's %q", got, want)
	}
	return nil
}

// ---- generated dumps ----

// kv is one member of a JSON object, its value as JSON text.
type kv struct{ k, v string }

func object(members ...kv) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Quote(m.k))
		b.WriteByte(':')
		b.WriteString(m.v)
	}
	b.WriteByte('}')
	return b.String()
}

// entryMembers is one entry as the testbed writes it (test/testbed/node.go).
func entryMembers(seq int) []kv {
	s := strconv.Itoa(seq)
	return []kv{
		{"record_id", strconv.Itoa(seq - 1)}, {"pg_id", "0"}, {"process_group", `["0","default_pg"]`},
		{"collective_seq_id", s}, {"p2p_seq_id", "0"}, {"op_id", s}, {"profiling_name", `"nccl:all_reduce"`},
		{"time_created_ns", "1764403200340963557"}, {"input_sizes", "[[13107200]]"}, {"input_dtypes", `["BFloat16"]`},
		{"output_sizes", "[[13107200]]"}, {"output_dtypes", `["BFloat16"]`}, {"state", `"completed"`},
		{"time_discovered_started_ns", "1764403200340983557"}, {"time_discovered_completed_ns", "1764403200376983557"},
		{"retired", "true"}, {"timeout_ms", "600000"}, {"is_p2p", "false"}, {"frames", "[]"},
		{"thread_name", `"pt_nccl_watchdg"`}, {"thread_id", `"140230000000003"`}, {"duration_ms", "35.5"},
	}
}

// dumpWith is a three-entry dump whose middle entry is mid.
func dumpWith(mid string, top ...kv) string {
	members := []kv{
		{"version", `"2.10"`}, {"comm_lib_version", `"2.27.3"`},
		{"pg_config", `{"0":{"name":"0","desc":"default_pg","ranks":"[0, 1, 2, 3]"}}`},
		{"pg_status", `{"0":{"last_enqueued_collective":"3","last_started_collective":"3","last_completed_collective":"2"}}`},
	}
	members = append(members, top...)
	members = append(members, kv{"entries", "[" + object(entryMembers(1)...) + "," + mid + "," + object(entryMembers(3)...) + "]"})
	return object(members...)
}

func withMember(members []kv, k, v string) []kv {
	out := slices.Clone(members)
	for i := range out {
		if out[i].k == k {
			out[i].v = v
			return out
		}
	}
	return append(out, kv{k, v})
}

func without(members []kv, k string) []kv {
	return slices.DeleteFunc(slices.Clone(members), func(m kv) bool { return m.k == k })
}

// nested is v inside depth lists or objects.
func nested(depth int, v string, objects bool) string {
	if objects {
		return strings.Repeat(`{"a":`, depth) + v + strings.Repeat("}", depth)
	}
	return strings.Repeat("[", depth) + v + strings.Repeat("]", depth)
}

// Values tried in every field: each type, numbers at and past int64's
// ends, floats out of range, strings with escapes, surrogates and invalid
// UTF-8.
var oddValues = []string{
	`null`, `true`, `false`, `0`, `-0`, `1`, `-1`, `1.5`, `1e3`, `1E+2`, `-1.0e-2`, `0.000001`,
	`9223372036854775807`, `9223372036854775808`, `-9223372036854775808`, `-9223372036854775809`,
	`99999999999999999999999`, `1e999`, `-1e999`, `1e-999`, `123456789012345678`, `1234567890123456789`,
	`""`, `"x"`, `"completed"`, `"12"`, `"-1"`, `" 7 "`, `"compl\u0065ted"`, `"\u00e9t\u00E9"`,
	`"\ud83d\ude00"`, `"\ud83d"`, `"\ude00"`, `"\ud83d\u0041"`, `"\ud83d\ud83d\ude00"`, `"\ud83dx"`,
	`"a\/b\"\\\b\f\n\r\t"`, `"\u0000"`, "\"\xff\"", "\"a\xc3\"", "\"\xed\xa0\x80\"", "\"\xf0\x9f\x98\"",
	"\"\xc0\xaf\"", "\"\xe2\x82\xac\"", "\"\xef\xbb\xbf\"", "\"\x7f\"",
	`[]`, `[[]]`, `[[1,2],[3]]`, `[[1],[]]`, `[["1"]]`, `[[1.5]]`, `[[null]]`, `[1]`, `[null]`,
	`["a","b"]`, `["a"]`, `["a","b","c"]`, `["a",1]`, `[1,"b"]`, `[[1e999]]`, `[[-9223372036854775809]]`,
	`{}`, `{"a":1}`, `[{"name":"f","filename":"g","line":3}]`, `[{"name":"f","line":"3"}]`, `[{}]`, `[{"x":1}]`,
	`[[[[[[1]]]]]]`, nested(70, "1", false), nested(63, "1", true),
}

// oddDumps are the generated dumps: every field of an entry with each odd
// value, missing, repeated; unknown keys at every depth; escaped keys;
// odd top-level values; trailing data.
func oddDumps() map[string]string {
	cases := map[string]string{}
	base := entryMembers(2)
	for _, m := range base {
		for i, v := range oddValues {
			cases[fmt.Sprintf("%s=%d", m.k, i)] = dumpWith(object(withMember(base, m.k, v)...))
		}
		cases[m.k+" missing"] = dumpWith(object(without(base, m.k)...))
		for i, v := range []string{m.v, `null`, `"x"`, `[[1]]`, `1`} {
			// The last of a repeated key wins, whatever the first was.
			cases[fmt.Sprintf("%s repeated %d", m.k, i)] = dumpWith(object(append(slices.Clone(base), kv{m.k, v})...))
			cases[fmt.Sprintf("%s repeated first %d", m.k, i)] = dumpWith(object(append([]kv{{m.k, v}}, base...)...))
		}
	}
	for depth := range 70 {
		for _, objects := range []bool{false, true} {
			name := fmt.Sprintf("depth %d objects %v", depth, objects)
			cases["entry extra "+name] = dumpWith(object(append(slices.Clone(base), kv{"extra", nested(depth, `"x"`, objects)})...))
			cases["top extra "+name] = dumpWith(object(base...), kv{"extra", nested(depth, "1", objects)})
			cases["pg_config "+name] = dumpWith(object(base...), kv{"pg_config", nested(depth, "{}", objects)})
			cases["entry "+name] = dumpWith(nested(depth, object(base...), objects))
		}
	}
	for i, k := range []string{`st\u0061te`, `\u0073tate`, `record_\u0069d`, "x\xff", `x\ud800`, `extra`, `extra`} {
		mid := object(base...)
		mid = mid[:len(mid)-1] + `,"` + k + `":"started"}`
		cases[fmt.Sprintf("escaped key %d", i)] = dumpWith(mid)
		cases[fmt.Sprintf("escaped top key %d", i)] = dumpWith(object(base...), kv{k, `"2.10"`})
	}
	cases["unknown repeated"] = dumpWith(object(append(slices.Clone(base), kv{"extra", "1"}, kv{"extra", "[1"})...))
	cases["empty entry"] = dumpWith("{}")
	for _, top := range []string{"version", "pg_config", "pg_status", "comm_lib_version", "nccl_version", "nccl_comm_state", "entries", "other"} {
		for i, v := range oddValues {
			cases[fmt.Sprintf("top %s=%d", top, i)] = object(kv{"version", `"2.10"`}, kv{top, v})
		}
	}
	cases["top repeated"] = object(kv{"version", `"2.10"`}, kv{"version", `"2.9"`})
	cases["entries repeated"] = object(kv{"entries", `[]`}, kv{"entries", `[]`})
	cases["pg_config group repeated"] = object(kv{"pg_config", `{"0":{"name":"a"},"0":{"name":"b","desc":"","ranks":"[0]"}}`})
	full := dumpWith(object(base...))
	for i, tail := range []string{"", " ", "\n", "\r\n\t ", " {}", "x", "]", "}", " 1", ` "s"`, "\x00", "null", "[", ",", " {\"version\":\"2.10\"}"} {
		cases[fmt.Sprintf("trailing %d", i)] = full + tail
	}
	for i, sep := range []string{" ", "\t", "\r\n", "\n  ", " \t\r\n"} {
		cases[fmt.Sprintf("white space %d", i)] = spaced(full, sep)
	}
	for i, bad := range []string{"[1,]", "[,1]", "[1 2]", "{\"a\" 1}", "{\"a\":1,}", "{,}", "[01]", "[-]", "[1.]", "[1e]", "[.5]", "[+1]",
		"[tru]", "[nul]", "[falsey]", "[\"\\x\"]", "[\"\\u12G4\"]", "[\"a\x01\"]", "{1:2}", "[']", "[NaN]", "[Infinity]", "[\"\\'\"]"} {
		cases[fmt.Sprintf("bad %d", i)] = dumpWith(object(withMember(base, "extra", bad)...))
	}
	return cases
}

// spaced puts sep after every structural character of the compact JSON
// in, and before every closing one.
func spaced(in, sep string) string {
	var b strings.Builder
	inString, escaped := false, false
	for i := range len(in) {
		c := in[i]
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			b.WriteByte(c)
			continue
		case c == '"':
			inString = true
		case c == '}' || c == ']':
			b.WriteString(sep)
		}
		b.WriteByte(c)
		if c == '{' || c == '[' || c == ',' || c == ':' {
			b.WriteString(sep)
		}
	}
	return b.String()
}

// fixtureDumps are the JSON fixtures under the receiver's directory and
// each pickle there in the JSON form (frdumptest.JSON), compact and
// indented with tabs too.
func fixtureDumps(tb testing.TB) map[string][]byte {
	tb.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.Contains(path, "testdata") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		trimmed := bytes.TrimLeft(data, " \t\r\n")
		switch {
		case len(trimmed) > 0 && trimmed[0] == '{':
			out[path] = data
			var compact, indented bytes.Buffer
			if json.Compact(&compact, data) == nil {
				out[path+" compact"] = compact.Bytes()
			}
			if json.Indent(&indented, data, "", "\t") == nil {
				out[path+" tabs"] = indented.Bytes()
			}
		case len(data) > 0 && data[0] == 0x80:
			d, _, err := frdump.Parse(data)
			if err != nil {
				return nil
			}
			js, err := frdumptest.JSON(d)
			require.NoError(tb, err, path)
			out[path+" as JSON"] = js
		}
		return nil
	})
	require.NoError(tb, err)
	return out
}

func TestJSONParserMatchesOracle(t *testing.T) {
	dumps := fixtureDumps(t)
	require.Greater(t, len(dumps), 60)
	synthetic, err := frdumptest.JSON(frdumptest.Synthetic(frdumptest.SyntheticConfig{Entries: 300, Version: "2.4"}))
	require.NoError(t, err)
	dumps["synthetic-300"] = synthetic
	dumps["testbed-24"] = testbedDump(t, 5, 24)
	for name, in := range dumps {
		for _, opts := range []frdump.Options{{}, {MaxTreeBytes: 2 << 10}, {MaxEntries: 7}, {Pickle: pickle.Options{MaxOutputBytes: 20 << 10}}} {
			if err := matchOracle(in, opts); err != nil {
				t.Errorf("%s, %+v: %v", name, opts, err)
			}
		}
	}
	for name, in := range oddDumps() {
		for _, opts := range []frdump.Options{{}, {MaxTreeBytes: 700}, {MaxEntries: 2}} {
			if err := matchOracle([]byte(in), opts); err != nil {
				t.Errorf("%s, %+v: %v\n%s", name, opts, err, in)
			}
		}
	}
}

// Every prefix of a small dump (most are syntax errors), and every limit
// around what it holds.
func TestJSONParserMatchesOracleAtEveryByteAndLimit(t *testing.T) {
	small := testbedDump(t, 1, 3)
	spacedSmall := []byte(spaced(string(small), " \n"))
	for _, in := range [][]byte{small, spacedSmall} {
		for i := range len(in) + 1 {
			for _, opts := range []frdump.Options{{}, {MaxTreeBytes: 600}, {MaxEntries: 2}} {
				if err := matchOracle(in[:i], opts); err != nil {
					t.Fatalf("cut at %d, %+v: %v\n%s", i, opts, err, in[:i])
				}
			}
		}
	}
	for limit := int64(1); limit < 1600; limit++ {
		if err := matchOracle(small, frdump.Options{MaxTreeBytes: limit}); err != nil {
			t.Fatalf("MaxTreeBytes %d: %v", limit, err)
		}
	}
	for budget := 1; budget < 3000; budget += 3 {
		if err := matchOracle(small, frdump.Options{Pickle: pickle.Options{MaxOutputBytes: budget}}); err != nil {
			t.Fatalf("MaxOutputBytes %d: %v", budget, err)
		}
	}
	for n := 1; n < 5; n++ {
		for _, tail := range []string{"]}", " ] } ", ",]}", " x]}", "", ",", ", {", "}", "\x00"} {
			in := append(bytes.TrimSuffix(small, []byte("]}")), tail...)
			if err := matchOracle(in, frdump.Options{MaxEntries: n}); err != nil {
				t.Fatalf("MaxEntries %d, ending %q: %v", n, tail, err)
			}
		}
	}
}

// FuzzJSONParserMatchesOracle holds the decoder to the oracle on any
// input, under any limits, and to the allocation bound of every parse.
func FuzzJSONParserMatchesOracle(f *testing.F) {
	for _, in := range fixtureDumps(f) {
		if len(in) < 64<<10 {
			f.Add(bytes.TrimLeft(in, " \t\r\n")[1:], uint16(0), uint8(0), uint16(0))
		}
	}
	f.Add(testbedDump(f, 2, 3)[1:], uint16(900), uint8(2), uint16(0))
	i := 0
	for _, in := range oddDumps() {
		if i++; i%16 == 0 {
			f.Add([]byte(in)[1:], uint16(i*7), uint8(i%4), uint16(i*11))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, maxTree uint16, maxEntries uint8, maxOutput uint16) {
		in := append([]byte("{"), data...)
		opts := frdump.Options{MaxTreeBytes: int64(maxTree), MaxEntries: int(maxEntries)}
		if maxOutput > 0 {
			opts.Pickle.MaxOutputBytes = int(maxOutput) * 16
		}
		if got := allocated(func() { _, _, _ = frdump.ParseWithOptions(in, opts) }); got > allocBound(len(in)) {
			t.Fatalf("parsing %d bytes allocated %d, over %d", len(in), got, allocBound(len(in)))
		}
		if err := matchOracle(in, opts); err != nil {
			t.Fatal(err)
		}
	})
}
