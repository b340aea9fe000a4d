package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// goTestOutput is what go test -bench -benchmem -count 2 prints, custom
// metrics and throughput included.
const goTestOutput = `goos: linux
goarch: amd64
pkg: github.com/otelcol-gpu/otelcol-gpu/receiver/ibreceiver
cpu: AMD EPYC 7B13
BenchmarkScrape8Devices 	      30	   8101026 ns/op	  258411 B/op	    4360 allocs/op
BenchmarkScrape8Devices 	      30	  10371867 ns/op	  259305 B/op	    4359 allocs/op
PASS
pkg: github.com/otelcol-gpu/otelcol-gpu/processor/ratelimitprocessor
BenchmarkTraces/within_budget         	    1000	    234406 ns/op	       114.5 ns/span	      2048 spans/op	   24208 B/op	     149 allocs/op
BenchmarkTranslate8GPU64KB 	       1	   2701259 ns/op	  23.01 MB/s	  616576 B/op	   17231 allocs/op
ok  	github.com/otelcol-gpu/otelcol-gpu/processor/ratelimitprocessor	0.05s
`

func TestParseOutput(t *testing.T) {
	rs, err := parseOutput(strings.NewReader(goTestOutput), "out", 1)
	require.NoError(t, err)
	ib := key{module + "receiver/ibreceiver", "BenchmarkScrape8Devices"}
	rl := key{module + "processor/ratelimitprocessor", "BenchmarkTraces/within_budget"}
	tr := key{module + "processor/ratelimitprocessor", "BenchmarkTranslate8GPU64KB"}
	assert.Equal(t, []key{ib, rl, tr}, rs.order)
	assert.Equal(t, result{iterations: 30, bytes: 258411, allocs: 4359}, rs.byKey[ib], "the lower of each metric over the runs")
	assert.Equal(t, result{iterations: 1000, bytes: 24208, allocs: 149}, rs.byKey[rl], "custom metrics are skipped")
	assert.Equal(t, result{iterations: 1, bytes: 616576, allocs: 17231}, rs.byKey[tr], "MB/s is skipped")
	assert.Equal(t, "receiver/ibreceiver BenchmarkScrape8Devices", ib.String())
}

func TestParseOutputProcsSuffix(t *testing.T) {
	in := "pkg: p\nBenchmarkA-2 \t 10 \t 5 ns/op \t 64 B/op \t 1 allocs/op\nBenchmarkB/x-2-2 \t 10 \t 5 ns/op \t 8 B/op \t 1 allocs/op\n"
	rs, err := parseOutput(strings.NewReader(in), "out", 2)
	require.NoError(t, err)
	assert.Equal(t, []key{{"p", "BenchmarkA"}, {"p", "BenchmarkB/x-2"}}, rs.order, "only the -cpu suffix is cut")

	rs, err = parseOutput(strings.NewReader(in), "out", 1)
	require.NoError(t, err)
	assert.Equal(t, []key{{"p", "BenchmarkA-2"}, {"p", "BenchmarkB/x-2-2"}}, rs.order, "at -cpu 1 go test adds no suffix: none is cut")
}

func TestParseOutputErrors(t *testing.T) {
	for _, c := range []struct {
		name, in, want string
	}{
		{"no benchmem", "pkg: p\nBenchmarkA \t 10 \t 5 ns/op\n", "out:2: BenchmarkA: no B/op and allocs/op (run with -benchmem)"},
		{"no allocs", "pkg: p\nBenchmarkA \t 10 \t 5 ns/op \t 64 B/op\n", "no B/op and allocs/op"},
		{"name alone", "pkg: p\nBenchmarkA \t\nsomething it printed\n", `out:2: a benchmark line without results: "BenchmarkA \t"`},
		{"no package", "BenchmarkA \t 10 \t 64 B/op \t 1 allocs/op\n", `out:1: benchmark BenchmarkA before any "pkg:" line`},
		{"bad iterations", "pkg: p\nBenchmarkA \t ten \t 64 B/op \t 1 allocs/op\n", `BenchmarkA: iterations "ten"`},
		{"odd fields", "pkg: p\nBenchmarkA \t 10 \t 64 B/op \t 1\n", "want value-unit pairs"},
		{"fractional", "pkg: p\nBenchmarkA \t 10 \t 64.5 B/op \t 1 allocs/op\n", `BenchmarkA: B/op "64.5": want a whole number`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseOutput(strings.NewReader(c.in), "out", 1)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

// The baseline is go test output: what writeBaseline writes parses back
// to the same results, in order.
func TestBaselineRoundTrip(t *testing.T) {
	rs, err := parseOutput(strings.NewReader(goTestOutput), "out", 1)
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, writeBaseline(&buf, rs, []string{"header one", "header two"}))
	out := buf.String()
	assert.True(t, strings.HasPrefix(out, "# header one\n# header two\n\npkg: "+module+"receiver/ibreceiver\n"), out)
	assert.NotContains(t, out, "ns/op", "no time in the baseline")
	back, err := parseOutput(strings.NewReader(out), "baseline", 1)
	require.NoError(t, err)
	assert.Equal(t, rs, back)
}
