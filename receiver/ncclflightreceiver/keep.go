package ncclflightreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver"

import (
	"maps"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/analysis"
)

// Which records of a rank the cross-rank analysis keeps when several dumps
// of it are read: a rank may dump to a pickle (what torch writes to disk,
// with the Python stacks) and be dumped as JSON too (torch's HTTP handler,
// no stacks), the two files named for the same rank and read in any
// order. Of two dumps of one moment (the same operations and pg_status)
// the one that carries more stacks is kept, whichever was read last; and a
// newer dump without a stack keeps the stack of the older when its newest
// operation is the same (a stuck rank's newest operation does not change,
// and neither does the stack it was enqueued with), so that a hang's
// fault quotes where the stuck rank is.

// keptRecords returns what to keep of a rank whose records were old when
// cur was read.
func keptRecords(old, cur *analysis.Rank) *analysis.Rank {
	if old == nil || cur == nil {
		return cur
	}
	if sameMoment(old, cur) && stacks(old) > stacks(cur) {
		return old
	}
	if cur.NewestStack == "" && old.NewestStack != "" && len(cur.Ops) > 0 && newestID(old) == newestID(cur) {
		kept := *cur // cur is read-only: a copy carries the stack
		kept.NewestStack = old.NewestStack
		return &kept
	}
	return cur
}

// sameMoment: the two dumps hold the same operations and pg_status.
func sameMoment(a, b *analysis.Rank) bool {
	if len(a.Ops) != len(b.Ops) || newestID(a) != newestID(b) || !maps.Equal(a.PGStatus, b.PGStatus) {
		return false
	}
	for i := range a.Ops {
		if a.Ops[i].RecordID != b.Ops[i].RecordID || a.Ops[i].State != b.Ops[i].State {
			return false
		}
	}
	return true
}

// stacks counts the Python stacks the records quote.
func stacks(r *analysis.Rank) int {
	n := 0
	if r.NewestStack != "" {
		n++
	}
	for i := range r.Ops {
		if r.Ops[i].Stack != "" {
			n++
		}
	}
	return n
}

func newestID(r *analysis.Rank) int64 {
	id := int64(-1)
	for i := range r.Ops {
		id = max(id, r.Ops[i].RecordID)
	}
	return id
}
