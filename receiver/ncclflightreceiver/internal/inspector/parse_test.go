package inspector

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fixtureLines returns the lines of the real README examples.
func fixtureLines(tb testing.TB) [][]byte {
	tb.Helper()
	data, err := os.ReadFile("testdata/readme-examples.v4.0.jsonl")
	require.NoError(tb, err)
	var lines [][]byte
	for line := range bytes.Lines(data) {
		lines = append(lines, bytes.TrimRight(line, "\n"))
	}
	require.Len(tb, lines, 3)
	return lines
}

func TestParseLineFixture(t *testing.T) {
	lines := fixtureLines(t)

	r, err := ParseLine(lines[0])
	require.NoError(t, err)
	assert.Equal(t, Header{CommID: "0x7f8c496ae9f661", Rank: 2, NRanks: 8, NNodes: 1}, r.Header)
	assert.Equal(t, Metadata{
		FormatVersion: "v4.0", Hostname: "example-hostname", PID: 1639453,
		RecMechanism: "profiler_plugin", DumpTimestamp: time.UnixMicro(1748030377748202),
	}, r.Metadata)
	assert.True(t, r.HasHeader)
	assert.True(t, r.HasMetadata)
	assert.Equal(t, KindCollective, r.Kind)
	assert.Equal(t, "AllReduce", r.Op)
	assert.Equal(t, int64(1407), r.Seq)
	assert.Equal(t, -1, r.Peer)
	assert.Equal(t, int64(17179869184), r.MsgBytes)
	assert.Equal(t, 61974*time.Microsecond, r.ExecTime)
	assert.Empty(t, r.TimingSource, "line 1 has no coll_timing_source")
	assert.Equal(t, 277.210914, r.AlgoBWGBs)
	assert.Equal(t, 485.119099, r.BusBWGBs)
	assert.True(t, r.Start.IsZero())
	assert.Zero(t, r.KernelChannels)

	// The verbose line: event traces give host and kernel times.
	r, err = ParseLine(lines[1])
	require.NoError(t, err)
	assert.Equal(t, 4, r.Rank)
	assert.Equal(t, "0xe62dedaa97644a", r.CommID)
	assert.Equal(t, "9019a1912-dirty", r.GitRev)
	assert.Equal(t, "nccl_profiler_interface", r.RecMechanism)
	assert.Equal(t, "ReduceScatter", r.Op)
	assert.Equal(t, int64(1231), r.Seq)
	assert.Equal(t, int64(2147483648), r.MsgBytes)
	assert.Equal(t, 41057*time.Microsecond, r.ExecTime)
	assert.Equal(t, "kernel_gpu", r.TimingSource)
	assert.Equal(t, 418.439467, r.AlgoBWGBs)
	assert.Equal(t, 366.134533, r.BusBWGBs)
	assert.Equal(t, time.UnixMicro(1752867229235059), r.Start)
	assert.Equal(t, time.UnixMicro(1752867229235064), r.Stop)
	assert.Equal(t, time.UnixMicro(1752867229235181), r.KernelStart)
	assert.Equal(t, time.UnixMicro(1752867229275811), r.KernelStop)
	assert.Equal(t, 1, r.KernelChannels)

	r, err = ParseLine(lines[2])
	require.NoError(t, err)
	assert.Equal(t, Header{CommID: "0x9e7a479f95a66c", Rank: 31, NRanks: 32, NNodes: 4}, r.Header)
	assert.Equal(t, int64(129), r.Seq)
	assert.Equal(t, int64(65536), r.MsgBytes)
	assert.Equal(t, 110*time.Microsecond, r.ExecTime)
	assert.Equal(t, 18.469236, r.BusBWGBs)
}

// p2pLine follows the plugin's writer (inspectorCompletedP2p): the same
// layout as coll_perf under a p2p_ prefix, plus p2p_peer.
const p2pLine = `{"header":{"id":"0xabc","comm_name":"PP Group 1","rank":3,"n_ranks":4,"nnodes":2},` +
	`"metadata":{"inspector_output_format_version":"v4.0","git_rev":"","rec_mechanism":"nccl_profiler_interface","dump_timestamp_us":1752867229276385,"hostname":"node-a","pid":42},` +
	`"p2p_perf":{"p2p":"Send","p2p_sn":17,"p2p_peer":1,"p2p_msg_size_bytes":524288,"p2p_exec_time_us":50,"p2p_timing_source":"kernel_gpu","p2p_algobw_gbs":10.485760,"p2p_busbw_gbs":10.485760,` +
	`"event_trace_sn":{"p2p_start_sn":1,"p2p_stop_sn":2,"kernel_events":[{"channel_id":0,"kernel_start_sn":3,"kernel_stop_sn":5,"kernel_record_sn":4},{"channel_id":1,"kernel_start_sn":6,"kernel_stop_sn":8,"kernel_record_sn":7}]},` +
	`"event_trace_ts":{"p2p_start_ts":1000,"p2p_stop_ts":1003,"kernel_events":[{"channel_id":0,"kernel_start_ts":1010,"kernel_stop_ts":1055,"kernel_record_ts":1055},{"channel_id":1,"kernel_start_ts":1008,"kernel_stop_ts":1060,"kernel_record_ts":1060}]}}}`

func TestParseLineP2P(t *testing.T) {
	r, err := ParseLine([]byte(p2pLine + "\n"))
	require.NoError(t, err)
	assert.Equal(t, KindP2P, r.Kind)
	assert.Equal(t, "Send", r.Op)
	assert.Equal(t, "PP Group 1", r.CommName)
	assert.Equal(t, int64(17), r.Seq)
	assert.Equal(t, 1, r.Peer)
	assert.Equal(t, int64(524288), r.MsgBytes)
	assert.Equal(t, 50*time.Microsecond, r.ExecTime)
	assert.Equal(t, "kernel_gpu", r.TimingSource)
	assert.Equal(t, 10.48576, r.AlgoBWGBs)
	assert.Equal(t, time.UnixMicro(1000), r.Start)
	assert.Equal(t, time.UnixMicro(1003), r.Stop)
	assert.Equal(t, time.UnixMicro(1008), r.KernelStart, "earliest channel start")
	assert.Equal(t, time.UnixMicro(1060), r.KernelStop, "latest channel stop")
	assert.Equal(t, 2, r.KernelChannels)
}

func TestParseLineNaNAndInf(t *testing.T) {
	tests := []struct {
		name              string
		algo, bus         string
		wantAlgo, wantBus float64
	}{
		{name: "string nan", algo: `"nan"`, bus: `"-nan"`, wantAlgo: math.NaN(), wantBus: math.NaN()},
		{name: "bare nan and inf as printf writes", algo: `nan`, bus: `inf`, wantAlgo: math.NaN(), wantBus: math.Inf(1)},
		{name: "string inf", algo: `"inf"`, bus: `"-inf"`, wantAlgo: math.Inf(1), wantBus: math.Inf(-1)},
		{name: "number as string", algo: `"12.5"`, bus: `1e2`, wantAlgo: 12.5, wantBus: 100},
		{name: "null", algo: `null`, bus: `""`, wantAlgo: math.NaN(), wantBus: math.NaN()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			line := `{"header":{"rank":0},"coll_perf":{"coll":"AllGather","coll_exec_time_us":"nan","coll_sn":"5","coll_algobw_gbs":` +
				tt.algo + `,"coll_busbw_gbs":` + tt.bus + `}}`
			r, err := ParseLine([]byte(line))
			require.NoError(t, err)
			assertFloat(t, tt.wantAlgo, r.AlgoBWGBs)
			assertFloat(t, tt.wantBus, r.BusBWGBs)
			assert.Zero(t, r.ExecTime, "a NaN time is unknown")
			assert.Equal(t, int64(5), r.Seq, "integers may be strings")
		})
	}
}

func assertFloat(t *testing.T, want, got float64) {
	t.Helper()
	if math.IsNaN(want) {
		assert.True(t, math.IsNaN(got), "want NaN, got %v", got)
		return
	}
	assert.Equal(t, want, got)
}

func TestParseLineAbsentFields(t *testing.T) {
	r, err := ParseLine([]byte(`{"coll_perf":{"coll":"Broadcast"}}`))
	require.NoError(t, err)
	assert.Equal(t, KindCollective, r.Kind)
	assert.False(t, r.HasHeader)
	assert.False(t, r.HasMetadata)
	assert.Equal(t, -1, r.Rank)
	assert.Equal(t, int64(-1), r.Seq)
	assert.Equal(t, -1, r.Peer)
	assert.True(t, math.IsNaN(r.BusBWGBs))
	assert.True(t, r.DumpTimestamp.IsZero())
}

// The layout of newer plugin sources: a dump_stats marker with header and
// metadata, then perf lines without them; unknown sections are skipped.
func TestParseLineNewerLayout(t *testing.T) {
	marker := `{"header":{"id":"0x1","comm_name":"unknown","rank":1,"n_ranks":2,"nnodes":1},"metadata":{"inspector_output_format_version":"v4.4","git_rev":"x","rec_mechanism":"nccl_profiler_interface","dump_timestamp_us":5,"hostname":"h","pid":7},` +
		`"dump_stats":{"coll_records":2,"coll_dropped_total":3,"coll_dropped_since_last_dump":1,"p2p_records":0,"p2p_dropped_total":0,"p2p_dropped_since_last_dump":0,"proxy_output_mode":"flat"}}`
	m, err := ParseLine([]byte(marker))
	require.NoError(t, err)
	assert.Equal(t, KindDumpStats, m.Kind)
	assert.Equal(t, DumpStats{CollRecords: 2, CollDroppedTotal: 3, CollDroppedSinceLastDump: 1}, m.DumpStats)

	perf := `{"coll_perf":{"coll":"AllReduce","coll_algo":"RING","coll_proto":"LL128","coll_sn":9,"coll_msg_size_bytes":8,"coll_exec_time_us":3,"coll_timing_source":"kernel_gpu","coll_algobw_gbs":0.1,"coll_busbw_gbs":0.2}}`
	r, err := ParseLine([]byte(perf))
	require.NoError(t, err)
	assert.Equal(t, "RING", r.Algo)
	assert.Equal(t, "LL128", r.Proto)
	r.Inherit(&m)
	assert.Equal(t, m.Header, r.Header)
	assert.Equal(t, m.Metadata, r.Metadata)
	assert.Equal(t, KindCollective, r.Kind)

	proxy := `{"proxy_trace":{"record_type":"proxy_op","record_sn":1,"is_final":true,"steps":[{"step":0,"event_trace_ts":{}}]}}`
	o, err := ParseLine([]byte(proxy))
	require.NoError(t, err)
	assert.Equal(t, KindOther, o.Kind)
}

func TestParseLineEscapesAndUnicode(t *testing.T) {
	line := `{"header":{"id":"0x\u0031","comm_name":"DP\/TP \"g\" \ud83d\ude00 \ud800 \t"},"metadata":{"hostname":"n\u00e9"},"coll_perf":{"coll":"AllReduce","\u0063oll_sn":3}}`
	r, err := ParseLine([]byte(line))
	require.NoError(t, err)
	assert.Equal(t, "0x1", r.CommID)
	assert.Equal(t, "DP/TP \"g\" 😀 \uFFFD \t", r.CommName)
	assert.Equal(t, "né", r.Hostname)
	assert.Equal(t, int64(3), r.Seq, "an escaped key still matches")

	r, err = ParseLine([]byte("{\"metadata\":{\"hostname\":\"a\xffb\"},\"coll_perf\":{\"coll\":\"X\"}}"))
	require.NoError(t, err)
	assert.Equal(t, "a\uFFFDb", r.Hostname, "invalid UTF-8 is replaced")
}

func TestParseLineMalformed(t *testing.T) {
	tests := []struct{ line, want string }{
		{``, "unexpected end of line"},
		{`[]`, `unexpected '['`},
		{`{"coll_perf":{"coll":"AllReduce"}`, "unexpected end of line inside object"},
		{`{"coll_perf":{"coll":"AllReduce"}} x`, "trailing data"},
		{`{"coll_perf":{"coll":"AllReduce"}}{"coll_perf":{}}`, "trailing data"},
		{`{"coll_perf":{"coll_sn":1}}`, "collective line has no operation name"},
		{`{"p2p_perf":{"p2p":"Send","p2p_peer":"x"}}`, `p2p_perf: p2p_peer: "x" is not a number`},
		{`{"coll_perf":{"coll":"A","coll_sn":1.5}}`, `coll_perf: coll_sn: "1.5" is not a 64-bit integer`},
		{`{"coll_perf":{"coll":"A","coll_sn":true}}`, "boolean where a number is expected"},
		{`{"coll_perf":{"coll":"A","coll_msg_size_bytes":18446744073709551615}}`, "not a 64-bit integer"},
		{`{"header":{"rank":99999999999},"coll_perf":{"coll":"A"}}`, "header: rank: 99999999999 out of range"},
		{`{"coll_perf":{"coll":"A","coll_exec_time_us":-5}}`, "coll_exec_time_us: -5 out of range"},
		{`{"coll_perf":{"coll":7}}`, "coll_perf: coll: unexpected '7', want a string"},
		{`{"coll_perf":{"coll":"A"},"p2p_perf":{"p2p":"Send"}}`, "a second operation section"},
		{`{"header":"x","coll_perf":{"coll":"A"}}`, "header: unexpected '\"', want '{'"},
		{"{\"coll_perf\":{\"coll\":\"A\x01\"}}", "control character 0x01"},
		{`{"coll_perf":{"coll":"A\q"}}`, `bad escape \q`},
		{`{"coll_perf":{"coll":"A\u12"}}`, `bad \u escape`},
		{`{"coll_perf":{"coll":"A`, "unterminated string"},
		{`{"coll_perf" {"coll":"A"}}`, `unexpected '{', want ':'`},
		{`{"x":[1 2]}`, `want ',' or ']'`},
		{`{"x":01x}`, `is not a number`},
		{`{"x":@}`, `unexpected '@', want a value`},
		{`{"x":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`, "nesting deeper than"},
		{`{"coll_perf":{"coll":"A","event_trace_ts":{"kernel_events":[{}{}]}}}`, "want ',' or ']' in kernel_events"},
		{`{"coll_perf":{"coll":"A","event_trace_ts":{"kernel_events":{}}}}`, "kernel_events: unexpected '{', want '['"},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			_, err := ParseLine([]byte(tt.line))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.Contains(t, err.Error(), "ncclflightreceiver: inspector line: ")
		})
	}
}

// The parser agrees with encoding/json on the values both understand.
func TestParseLineAgreesWithEncodingJSON(t *testing.T) {
	for _, line := range append(fixtureLines(t), []byte(p2pLine)) {
		var generic map[string]map[string]any
		require.NoError(t, json.Unmarshal(line, &generic))
		r, err := ParseLine(line)
		require.NoError(t, err)
		perf, prefix := generic["coll_perf"], "coll"
		if perf == nil {
			perf, prefix = generic["p2p_perf"], "p2p"
		}
		assert.Equal(t, perf[prefix], r.Op)
		assert.Equal(t, perf[prefix+"_sn"], float64(r.Seq))
		assert.Equal(t, perf[prefix+"_msg_size_bytes"], float64(r.MsgBytes))
		assert.Equal(t, perf[prefix+"_busbw_gbs"], r.BusBWGBs)
		assert.Equal(t, generic["header"]["rank"], float64(r.Rank))
		assert.Equal(t, generic["metadata"]["hostname"], r.Hostname)
	}
}

// benchmarkInput is a few MB of realistic lines: the README's three shapes
// (plain, verbose, multi-node) and the p2p shape, with varying numbers.
func benchmarkInput(tb testing.TB) []byte {
	tb.Helper()
	var buf bytes.Buffer
	shapes := append(fixtureLines(tb), []byte(p2pLine))
	for i := 0; buf.Len() < 4<<20; i++ {
		line := shapes[i%len(shapes)]
		line = bytes.Replace(line, []byte(`_sn":`), fmt.Appendf(nil, `_sn":%d`, i+1), 1) // new leading digits
		buf.Write(line)
		buf.WriteByte('\n')
	}
	return buf.Bytes()
}

func BenchmarkParseLines(b *testing.B) {
	data := benchmarkInput(b)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			if _, err := ParseLine(sc.Bytes()); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func FuzzParseLine(f *testing.F) {
	for _, line := range fixtureLines(f) {
		f.Add(line)
	}
	f.Add([]byte(p2pLine))
	f.Add([]byte(`{"coll_perf":{"coll":"A","coll_busbw_gbs":"nan","coll_algobw_gbs":-nan}}`))
	f.Add([]byte(`{"dump_stats":{"coll_records":1},"header":{"id":"\u0041"}}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := ParseLine(line)
		if err != nil {
			return
		}
		if (r.Kind == KindCollective || r.Kind == KindP2P) && r.Op == "" {
			t.Fatalf("accepted a %s line without an operation: %q", r.Kind, line)
		}
		if r.ExecTime < 0 {
			t.Fatalf("negative exec time from %q", line)
		}
		// Valid JSON that the parser accepts must also be read the same way
		// by encoding/json for the operation name.
		if json.Valid(line) && r.Kind == KindCollective {
			var generic struct {
				Perf struct {
					Coll string `json:"coll"`
				} `json:"coll_perf"`
			}
			if json.Unmarshal(line, &generic) == nil && generic.Perf.Coll != r.Op && utf8.ValidString(generic.Perf.Coll) {
				t.Fatalf("op %q, encoding/json says %q, line %q", r.Op, generic.Perf.Coll, line)
			}
		}
	})
}
