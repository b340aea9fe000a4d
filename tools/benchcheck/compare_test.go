package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestThresholds(t *testing.T) {
	th := defaultThresholds
	for _, c := range []struct {
		name           string
		old, new       int64
		allocs, bytes_ bool // rose as allocs/op, as B/op
	}{
		{"same", 4360, 4360, false, false},
		{"fewer", 4360, 100, false, false},
		{"10 % exactly", 1000, 1100, false, false},
		{"just over 10 %", 1000, 1101, true, true},
		{"9 %", 4360, 4752, false, false},
		{"a new allocation on a zero-alloc path", 0, 1, true, false},
		{"3 -> 4: one more allocation per op", 3, 4, true, false},
		{"tiny B/op: 17 -> 80, under 64 bytes more", 17, 80, true, false},
		{"tiny B/op: 17 -> 81, 64 bytes more", 17, 81, true, true},
		{"0 -> 63 B", 0, 63, true, false},
		{"0 -> 64 B", 0, 64, true, true},
		{"large, just under", 259305, 285235, false, false},
		{"large, just over", 259305, 285236, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.allocs, th.rose(c.old, c.new, th.MinAllocs), "allocs/op")
			assert.Equal(t, c.bytes_, th.rose(c.old, c.new, th.MinBytes), "B/op")
		})
	}
	assert.True(t, th.fell(100, 89, 1))
	assert.False(t, th.fell(100, 90, 1), "10 % exactly")
	assert.False(t, th.fell(3, 2, 2), "under the absolute slack")
}

func resultsOf(rows ...any) *results {
	rs := newResults()
	for i := 0; i < len(rows); i += 2 {
		rs.add(rows[i].(key), rows[i+1].(result))
	}
	return rs
}

var (
	kScrape = key{module + "receiver/ibreceiver", "BenchmarkScrape8Devices"}
	kBuild  = key{module + "receiver/dcgmreceiver", "BenchmarkBuild8GPUsOTel"}
	kStep   = key{module + "connector/faultcorrelatorconnector", "BenchmarkStep"}
	kNew    = key{module + "receiver/dcgmreceiver", "BenchmarkNew"}
)

func TestCompareWithin(t *testing.T) {
	base := resultsOf(kScrape, result{30, 259305, 4360}, kStep, result{200, 24, 1})
	run := resultsOf(kScrape, result{30, 259587, 4360}, kStep, result{200, 24, 1})
	rep := compare(base, run, defaultThresholds)
	assert.False(t, rep.failed())
	var out bytes.Buffer
	rep.print(&out, defaultThresholds, "baseline.txt")
	assert.Contains(t, out.String(), "receiver/ibreceiver BenchmarkScrape8Devices")
	assert.Regexp(t, `BenchmarkScrape8Devices\s+259305\s+259587\s+\+0\.1%\s+4360\s+4360\s+0%\n`, out.String())
	assert.NotContains(t, out.String(), "FAIL")
}

func TestCompareRose(t *testing.T) {
	base := resultsOf(kScrape, result{30, 259305, 4360}, kBuild, result{300, 135400, 2843}, kStep, result{200, 24, 1})
	// The scrape: two more allocations per point (8 devices x 45 points),
	// 48 bytes in all.
	run := resultsOf(kScrape, result{30, 259305 + 8*45*48, 4360 + 8*45*2}, kBuild, result{300, 100000, 2000}, kStep, result{200, 48, 2})
	rep := compare(base, run, defaultThresholds)
	assert.True(t, rep.failed())
	rose := rep.rose()
	assert.Len(t, rose, 2)
	assert.Equal(t, kScrape, rose[0].key)
	assert.True(t, rose[0].allocsRose, "+16.5 %")
	assert.False(t, rose[0].bytesRose, "+6.7 %")
	assert.Equal(t, kStep, rose[1].key)
	assert.True(t, rose[1].allocsRose, "1 -> 2 allocs/op")
	assert.False(t, rose[1].bytesRose, "24 -> 48 B/op: under 64 bytes more")

	var out bytes.Buffer
	rep.print(&out, defaultThresholds, "baseline.txt")
	s := out.String()
	assert.Contains(t, s, "FAIL: 2 benchmark(s) allocate more than the baseline allows (a rise of more than 10 %, and at least 1 allocs/op or 64 B/op):\n")
	assert.Contains(t, s, "  receiver/ibreceiver BenchmarkScrape8Devices: allocs/op 4360 -> 5080 (+16.5%)\n")
	assert.Contains(t, s, "  connector/faultcorrelatorconnector BenchmarkStep: allocs/op 1 -> 2 (+100.0%)\n")
	assert.Contains(t, s, "make bench-baseline")
	assert.Regexp(t, `BenchmarkBuild8GPUsOTel .* fell\n`, s)
	assert.Contains(t, s, "1 benchmark(s) allocate less than the baseline")
}

func TestCompareMaxRise(t *testing.T) {
	// The thresholds are the caller's: -max-rise 0.05. +5.5 %:
	th := thresholds{MaxRise: 0.05, MinAllocs: 1, MinBytes: 64}
	base := resultsOf(kScrape, result{30, 259305, 4360})
	run := resultsOf(kScrape, result{30, 259305, 4600})
	assert.False(t, compare(base, run, defaultThresholds).failed())
	assert.True(t, compare(base, run, th).failed())
}

func TestCompareMissingExtraIterations(t *testing.T) {
	base := resultsOf(kScrape, result{30, 259305, 4360}, kBuild, result{300, 135400, 2843})
	run := resultsOf(kScrape, result{50, 259305, 4360}, kNew, result{10, 8, 1})
	rep := compare(base, run, defaultThresholds)
	assert.True(t, rep.failed())
	assert.Empty(t, rep.rose())
	assert.Equal(t, []key{kBuild}, rep.missing)
	assert.Equal(t, []key{kNew}, rep.extra)
	assert.Len(t, rep.iterations, 1)

	var out bytes.Buffer
	rep.print(&out, defaultThresholds, "baseline.txt")
	s := out.String()
	assert.Contains(t, s, "FAIL: 1 benchmark(s) in baseline.txt were not run (removed, renamed, or dropped from the list):\n  receiver/dcgmreceiver BenchmarkBuild8GPUsOTel\n")
	assert.Contains(t, s, "FAIL: 1 benchmark(s) ran that baseline.txt does not have (new, or renamed):\n  receiver/dcgmreceiver BenchmarkNew\n")
	assert.Contains(t, s, "  receiver/ibreceiver BenchmarkScrape8Devices: 50x now, 30x in the baseline\n")
	assert.Contains(t, s, "make bench-baseline rewrites it")
}

func TestDelta(t *testing.T) {
	assert.Equal(t, "0%", delta(0, 0))
	assert.Equal(t, "0%", delta(5, 5))
	assert.Equal(t, "+3", delta(0, 3))
	assert.Equal(t, "+33.3%", delta(3, 4))
	assert.Equal(t, "-50.0%", delta(4, 2))
}
