package analysis

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump/frdumptest"
)

// A Rank keeps what findings quote and no more: the stacks of operations
// not completed and the rank's newest stack; the completed operations
// share one OpInfo per kind of collective.
func TestCompactKeepsOnlyTheStacksFindingsShow(t *testing.T) {
	d := frdumptest.Synthetic(frdumptest.SyntheticConfig{Entries: 100})
	d.Entries[97].State = frdump.StateStarted
	d.Entries[98].State, d.Entries[98].Retired = frdump.StateScheduled, true
	d.Entries[99].Frames = nil // the newest entry with frames is 98
	rk := Compact(3, d)
	require.Len(t, rk.Ops, 100)
	assert.Equal(t, 3, rk.Rank)
	assert.Equal(t, 2, rk.Incomplete)
	infos := map[*OpInfo]bool{}
	for i := range rk.Ops {
		op := &rk.Ops[i]
		assert.Equal(t, d.Entries[i].RecordID, op.RecordID)
		assert.Equal(t, d.Entries[i].ProfilingName, op.ProfilingName)
		assert.Equal(t, d.Entries[i].InputSizes, op.InputSizes)
		if i < 97 || i == 99 {
			assert.Empty(t, op.Stack, "no stack kept for a completed operation")
		} else {
			assert.Equal(t, stackText(d.Entries[i].Frames), op.Stack)
		}
		infos[op.OpInfo] = true
	}
	assert.True(t, rk.Ops[98].TimedOut())
	assert.Len(t, infos, 4, "all_reduce and broadcast completed, and the two not completed")
	assert.Equal(t, stackText(d.Entries[98].Frames), rk.NewestStack)
	assert.Equal(t, d.PGStatus, rk.PGStatus)
}

// Over its Limit, a Builder stops with ErrRankBudget.
func TestBuilderLimit(t *testing.T) {
	d := frdumptest.Synthetic(frdumptest.SyntheticConfig{Entries: 2000})
	b := NewBuilder(0, 0)
	b.Limit = 50 << 10
	var err error
	for i := range d.Entries {
		if err = b.Add(&d.Entries[i]); err != nil {
			break
		}
	}
	require.ErrorIs(t, err, ErrRankBudget)
	assert.LessOrEqual(t, int64(cap(b.rank.Ops))*OpBytes, b.Limit, "refused before it grew past the limit")

	b = NewBuilder(0, 0)
	b.Limit = 1 << 20
	require.NoError(t, b.Grow(len(d.Entries)))
	for i := range d.Entries {
		require.NoError(t, b.Add(&d.Entries[i]))
	}
	rk, err := b.Finish(d)
	require.NoError(t, err)
	assert.Equal(t, rk.Bytes, b.Bytes())
	assert.Less(t, rk.Bytes, int64(1<<20))
}

// BenchmarkRankBytes measures what a Rank holds per entry (Rank.Bytes, and
// the live heap it takes) for torch's default ring buffer and for the
// largest dump read, against the whole frdump.Dump it comes from.
func BenchmarkRankBytes(b *testing.B) {
	for _, n := range []int{2000, 20000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			d := frdumptest.Synthetic(frdumptest.SyntheticConfig{Entries: n})
			var rk *Rank
			var heap uint64
			for b.Loop() {
				before := liveHeap()
				rk = Compact(0, d)
				heap = liveHeap() - before
			}
			runtime.KeepAlive(rk)
			b.ReportMetric(float64(rk.Bytes)/float64(n), "counted-B/entry")
			b.ReportMetric(float64(heap)/float64(n), "heap-B/entry")
		})
	}
}

// BenchmarkAnalyzeRanksBytes measures what one analysis of a 16-rank job of
// 20,000 entries a rank allocates per operation, and the most it holds at
// once (the collector run after every allocation it can: GOGC=1, so that
// the sampled heap is what is live): analysisBytesPerOp in the receiver.
func BenchmarkAnalyzeRanksBytes(b *testing.B) {
	const ranks, n = 16, 20000
	rs := make([]*Rank, ranks)
	for r := range rs {
		rs[r] = Compact(r, frdumptest.Synthetic(frdumptest.SyntheticConfig{Rank: r, WorldSize: ranks, Entries: n}))
	}
	var allocated, peak uint64
	for b.Loop() {
		var before, after runtime.MemStats
		base := liveHeap()
		runtime.ReadMemStats(&before)
		gc := debug.SetGCPercent(1)
		stop := samplePeak()
		AnalyzeRanks(rs, Options{})
		top := stop()
		debug.SetGCPercent(gc)
		runtime.ReadMemStats(&after)
		allocated = after.TotalAlloc - before.TotalAlloc
		peak = max(top, base) - base
	}
	b.ReportMetric(float64(allocated)/float64(ranks*n), "alloc-B/op")
	b.ReportMetric(float64(peak)/float64(ranks*n), "peak-live-B/op")
}

// samplePeak samples the live heap every 100 µs until the returned
// function is called, which returns the largest seen.
func samplePeak() func() uint64 {
	stop, peak := make(chan struct{}), make(chan uint64)
	go func() {
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		var top uint64
		tick := time.NewTicker(100 * time.Microsecond)
		defer tick.Stop()
		for {
			metrics.Read(s)
			top = max(top, s[0].Value.Uint64())
			select {
			case <-stop:
				peak <- top
				return
			case <-tick.C:
			}
		}
	}()
	return func() uint64 {
		close(stop)
		return <-peak
	}
}

func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
