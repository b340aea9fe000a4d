package stragglerprocessor

import (
	"strconv"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// BenchmarkNodeOffsets16384Ranks is the clock check's work on one decided
// step of a 16,384-rank job on 2,048 nodes (8 ranks each, one after
// another, as a step's records usually are): what clock_skew_warning costs
// a step while it runs.
func BenchmarkNodeOffsets16384Ranks(b *testing.B) {
	const ranks = 16384
	recs := make([]rankRecord, ranks)
	hosts := make([]string, ranks/8)
	for n := range hosts {
		hosts[n] = "xl" + strconv.Itoa(n)
	}
	for r := range recs {
		recs[r] = rankRecord{host: hosts[r/8], end: pcommon.NewTimestampFromTime(t0.Add(time.Duration(r%7) * time.Millisecond))}
	}
	var c clockScratch
	c.nodeOffsets(recs) // the scratch grown, as in a running job
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if len(c.nodeOffsets(recs)) != len(hosts) {
			b.Fatal("nodes lost")
		}
	}
}
