package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseList(t *testing.T) {
	list, err := parseList(strings.NewReader(`
# a comment
./receiver/ibreceiver   ^BenchmarkScrape8Devices$   30x   # trailing comment
./processor/x/          ^BenchmarkA$/^sub$          1x
./receiver/ibreceiver   ^BenchmarkOther$            20000x
`), "list.txt")
	require.NoError(t, err)
	assert.Equal(t, []entry{
		{line: 3, dir: "./receiver/ibreceiver", bench: "^BenchmarkScrape8Devices$", iterations: 30},
		{line: 4, dir: "./processor/x", bench: "^BenchmarkA$/^sub$", iterations: 1},
		{line: 5, dir: "./receiver/ibreceiver", bench: "^BenchmarkOther$", iterations: 20000},
	}, list)
	assert.Equal(t, []string{"./receiver/ibreceiver", "./processor/x"}, packages(list), "each package once, in order")
}

func TestParseListErrors(t *testing.T) {
	for _, c := range []struct {
		name, in, want string
	}{
		{"empty", "# nothing\n\n", "list.txt: no benchmarks listed"},
		{"two fields", "./a ^BenchmarkA$\n", "list.txt:1: want \"DIR REGEXP ITERATIONS\", got 2 fields"},
		{"four fields", "./a ^BenchmarkA$ 1x 2x\n", "got 4 fields"},
		{"not relative", "receiver/a ^BenchmarkA$ 1x\n", `list.txt:1: package "receiver/a": want one directory relative to the module root`},
		{"a pattern", "./receiver/... ^BenchmarkA$ 1x\n", `package "./receiver/..."`},
		{"bad regexp", "\n./a ^Benchmark(A$ 1x\n", "list.txt:2: benchmark regexp \"^Benchmark(A$\": error parsing regexp"},
		{"bad sub regexp", "./a ^BenchmarkA$/[ 1x\n", `benchmark regexp "^BenchmarkA$/["`},
		{"a time", "./a ^BenchmarkA$ 1s\n", `list.txt:1: iterations "1s": want a count as -benchtime takes it, as 100x`},
		{"no x", "./a ^BenchmarkA$ 100\n", `iterations "100"`},
		{"zero", "./a ^BenchmarkA$ 0x\n", `iterations "0x"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseList(strings.NewReader(c.in), "list.txt")
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}
