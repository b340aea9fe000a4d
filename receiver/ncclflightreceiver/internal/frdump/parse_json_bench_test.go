package frdump_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump/frdumptest"
)

// testbedDump is what test/testbed/node.go's writeDump writes for one rank
// of an 8-rank job (frRing entries, every other one still running): what
// `go run ./cmd/loadgen -mode agent` has the agent read every step.
func testbedDump(tb testing.TB, rank, entries int) []byte {
	tb.Helper()
	const world = 8
	ranks := make([]string, world)
	for i := range ranks {
		ranks[i] = strconv.Itoa(i)
	}
	start := time.Date(2026, 12, 6, 1, 0, 0, 0, time.UTC)
	list := make([]map[string]any, 0, entries)
	var last int64
	for i := range entries {
		seq := int64(1000 + i)
		created := start.Add(time.Duration(i) * 1500 * time.Millisecond)
		state := "completed"
		if i == entries-1 {
			state = "started"
		}
		m := map[string]any{
			"record_id":                    seq - 1,
			"pg_id":                        0,
			"process_group":                []string{"0", "default_pg"},
			"collective_seq_id":            seq,
			"p2p_seq_id":                   0,
			"op_id":                        seq,
			"profiling_name":               "nccl:all_reduce",
			"time_created_ns":              created.UnixNano(),
			"input_sizes":                  [][]int64{{13107200}},
			"input_dtypes":                 []string{"BFloat16"},
			"output_sizes":                 [][]int64{{13107200}},
			"output_dtypes":                []string{"BFloat16"},
			"state":                        state,
			"time_discovered_started_ns":   created.Add(20 * time.Microsecond).UnixNano(),
			"time_discovered_completed_ns": nil,
			"retired":                      state == "completed",
			"timeout_ms":                   int64(600000),
			"is_p2p":                       false,
			"frames":                       []any{},
			"thread_name":                  "pt_nccl_watchdg",
			"thread_id":                    strconv.Itoa(140230000000000 + rank),
		}
		if state == "completed" {
			d := 35*time.Millisecond + time.Duration(i)*time.Microsecond
			m["time_discovered_completed_ns"] = created.Add(d + 50*time.Microsecond).UnixNano()
			m["duration_ms"] = float64(d) / float64(time.Millisecond)
			last = seq
		}
		list = append(list, m)
	}
	n := strconv.FormatInt(int64(1000+entries-1), 10)
	data, err := json.Marshal(map[string]any{
		"version":          "2.10",
		"comm_lib_version": "2.27.3",
		"pg_config":        map[string]map[string]string{"0": {"name": "0", "desc": "default_pg", "ranks": "[" + strings.Join(ranks, ", ") + "]"}},
		"pg_status":        map[string]map[string]string{"0": {"last_enqueued_collective": n, "last_started_collective": n, "last_completed_collective": strconv.FormatInt(last, 10)}},
		"entries":          list,
	})
	require.NoError(tb, err)
	return data
}

// BenchmarkParseJSON parses the JSON dumps the receiver reads: the load
// harness's (testbed-24), torch's own (torch-50, a real rank's dump, 1-space
// indented) and torch's default ring buffer (synthetic-2000), each whole
// and streamed as the receiver reads them (Options.Entry, MaxTreeBytes).
func BenchmarkParseJSON(b *testing.B) { benchmarkParseJSON(b, frdump.ParseWithOptions) }

// BenchmarkParseJSONOracle is BenchmarkParseJSON with the encoding/json
// decoder that parseJSON replaced (issue 32), for a comparison in one run.
func BenchmarkParseJSONOracle(b *testing.B) { benchmarkParseJSON(b, frdump.ParseWithOracle) }

func benchmarkParseJSON(b *testing.B, parse parseFunc) {
	synthetic, err := frdumptest.JSON(frdumptest.Synthetic(frdumptest.SyntheticConfig{Entries: 2000}))
	require.NoError(b, err)
	for _, c := range []struct {
		name string
		in   []byte
	}{
		{"testbed-24", testbedDump(b, 3, 24)},
		{"torch-50", readFile(b, "testdata/dp8-straggler5-v2.10/nccl_trace_rank_5.json")},
		{"synthetic-2000", synthetic},
	} {
		b.Run(c.name+"/whole", func(b *testing.B) {
			b.SetBytes(int64(len(c.in)))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := parse(c.in, frdump.Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/streamed", func(b *testing.B) {
			b.SetBytes(int64(len(c.in)))
			b.ReportAllocs()
			n := 0
			opts := frdump.Options{MaxTreeBytes: 48 << 20, Entry: func(int, int, *frdump.Entry) error {
				n++
				return nil
			}}
			for b.Loop() {
				if _, _, err := parse(c.in, opts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The entries of torch's JSON dumps and of the load harness's take the
// fast path (parse_json_entry.go): a dump streamed costs a few dozen
// allocations, whatever its entries, where the generic values cost some 75
// an entry, and encoding/json's tokens some 350 (BENCHMARKS.md, issue 32).
func TestParseJSONEntriesTakeTheFastPath(t *testing.T) {
	opts := frdump.Options{MaxTreeBytes: 1 << 20, Entry: func(int, int, *frdump.Entry) error { return nil }}
	for name, in := range map[string][]byte{
		"testbed-24": testbedDump(t, 3, 24),
		"torch-50":   readFile(t, "testdata/dp8-straggler5-v2.10/nccl_trace_rank_5.json"),
	} {
		allocs := testing.AllocsPerRun(5, func() {
			_, _, err := frdump.ParseWithOptions(in, opts)
			require.NoError(t, err)
		})
		assert.LessOrEqual(t, allocs, 100.0, name)
	}
}
