package frdump_test

import (
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/analysis"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump/frdumptest"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/pickle"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/pickle/pickletest"
)

// memUse is what one call cost: the bytes it allocated in all, and the
// largest growth of the live heap seen while it ran (sampled every 100 µs
// from runtime/metrics, so a shorter spike can be missed), both measured
// from a collected heap.
type memUse struct {
	totalAlloc uint64
	peakHeap   uint64
}

func measure(f func()) memUse {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(sample)
	base := sample[0].Value.Uint64()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
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
	f()
	close(stop)
	top := <-peak
	runtime.ReadMemStats(&after)
	use := memUse{totalAlloc: after.TotalAlloc - before.TotalAlloc}
	if top > base {
		use.peakHeap = top - base
	}
	return use
}

// BenchmarkParseMemory measures the heap that parsing one dump costs, for
// torch's default ring buffer and for the largest honest dumps that the
// default Options accept. Each iteration reports the total allocation and
// the peak growth of the live heap (the result kept alive, as the receiver
// kept the newest dump of each rank before issue 29); the -streamed cases
// hand the entries to the analysis' compact records as the receiver does
// now, keeping only those.
func BenchmarkParseMemory(b *testing.B) {
	pickleOf := func(entries, frames int) []byte {
		return frdumptest.Pickle(frdumptest.Synthetic(frdumptest.SyntheticConfig{Entries: entries, Frames: frames}))
	}
	jsonOf := func(entries int) []byte {
		js, err := frdumptest.JSON(frdumptest.Synthetic(frdumptest.SyntheticConfig{Entries: entries}))
		require.NoError(b, err)
		return js
	}
	cases := []struct {
		name    string
		in      func() []byte
		refused error // nil: read
	}{
		{"pickle-2000x16", func() []byte { return pickleOf(2000, 16) }, nil},
		{"pickle-20000x16", func() []byte { return pickleOf(20000, 16) }, nil},
		{"pickle-10000x64", func() []byte { return pickleOf(10000, 64) }, nil},
		{"json-2000", func() []byte { return jsonOf(2000) }, nil},
		{"json-20000", func() []byte { return jsonOf(20000) }, nil},
		// The largest inputs the size limits let through: refused by the
		// output budget and MaxEntries.
		{"pickle-45000x16-refused", func() []byte { return pickleOf(45000, 16) }, pickle.ErrLimit},
		{"json-22500-refused", func() []byte { return jsonOf(22500) }, frdump.ErrLimit},
		{"memo-bomb-refused", func() []byte { return pickletest.MemoBomb(1000, 1<<20-1) }, pickle.ErrLimit},
	}
	// What the receiver does since issue 29: the entries streamed into the
	// analysis' compact records (analysis.Builder), never all held.
	streamed := func(in []byte) (*frdump.Dump, error) {
		bld := analysis.NewBuilder(0, 0)
		d, _, err := frdump.ParseWithOptions(in, frdump.Options{Entry: func(i, n int, e *frdump.Entry) error {
			if i == 0 && n > 0 {
				_ = bld.Grow(n)
			}
			return bld.Add(e)
		}})
		if err == nil {
			_, err = bld.Finish(d)
		}
		return d, err
	}
	for _, c := range []struct {
		name string
		in   func() []byte
	}{
		{"pickle-2000x16-streamed", func() []byte { return pickleOf(2000, 16) }},
		{"pickle-20000x16-streamed", func() []byte { return pickleOf(20000, 16) }},
		{"json-20000-streamed", func() []byte { return jsonOf(20000) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			in := c.in()
			b.SetBytes(int64(len(in)))
			var worst memUse
			for b.Loop() {
				use := measure(func() {
					_, err := streamed(in)
					require.NoError(b, err)
				})
				worst.totalAlloc = max(worst.totalAlloc, use.totalAlloc)
				worst.peakHeap = max(worst.peakHeap, use.peakHeap)
			}
			b.ReportMetric(float64(len(in))/(1<<20), "input-MiB")
			b.ReportMetric(float64(worst.totalAlloc)/(1<<20), "total-alloc-MiB")
			b.ReportMetric(float64(worst.peakHeap)/(1<<20), "peak-heap-MiB")
		})
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			in := c.in()
			b.SetBytes(int64(len(in)))
			var worst memUse
			var d *frdump.Dump
			for b.Loop() {
				use := measure(func() {
					var err error
					d, _, err = frdump.Parse(in)
					if c.refused != nil {
						require.ErrorIs(b, err, c.refused)
					} else {
						require.NoError(b, err)
					}
				})
				worst.totalAlloc = max(worst.totalAlloc, use.totalAlloc)
				worst.peakHeap = max(worst.peakHeap, use.peakHeap)
			}
			runtime.KeepAlive(d)
			b.ReportMetric(float64(len(in))/(1<<20), "input-MiB")
			b.ReportMetric(float64(worst.totalAlloc)/(1<<20), "total-alloc-MiB")
			b.ReportMetric(float64(worst.peakHeap)/(1<<20), "peak-heap-MiB")
		})
	}
}
