package nodestate

import (
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const uuid0 = "GPU-c2f76b33-7953-256e-8f33-1343419b1a1c"

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

// fixedClock is a wall clock the test moves by hand.
type fixedClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fixedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fixedClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// withClock sets the wall clock the store reads for idle eviction and for
// rejecting readings from the future.
func withClock(now func() time.Time) Option {
	return func(s *MemoryStore) { s.now = now }
}

func newTestStore(limits Limits) (*MemoryStore, *fixedClock) {
	clock := &fixedClock{now: at(0)}
	return NewMemoryStore(limits, withClock(clock.Now)), clock
}

func gpuSample(sm, temp float64, crcFlit, dbe uint64, reasons ...string) GPUSample {
	s := GPUSample{
		SMActive:        Gauge{Value: sm, Valid: true},
		TemperatureC:    Gauge{Value: temp, Valid: true},
		ThrottleReasons: reasons,
		ThrottleValid:   true,
	}
	s.Counters[NVLinkCRCFlitErrors] = Counter{Value: crcFlit, Start: t0, Valid: true}
	s.Counters[ECCDBEVolatile] = Counter{Value: dbe, Start: t0, Valid: true}
	return s
}

func TestGPUHealthOverAStep(t *testing.T) {
	s, clock := newTestStore(DefaultLimits())
	clock.Set(at(100))
	s.RecordGPU(uuid0, at(10), gpuSample(0.90, 60, 0, 0))
	s.RecordGPU(uuid0, at(20), gpuSample(0.92, 61, 2, 0, "sw_power_cap"))
	s.RecordGPU(uuid0, at(30), gpuSample(0.40, 83, 5, 1, "sw_thermal_slowdown", "hw_slowdown"))
	// A reading with the temperature only leaves the other fields as they were.
	s.RecordGPU(uuid0, at(40), GPUSample{TemperatureC: Gauge{Value: 84, Valid: true}})

	h, ok := s.GPUHealth(uuid0, at(15), at(35))
	require.True(t, ok)
	assert.Equal(t, uuid0, h.UUID)
	assert.Equal(t, GaugeReading{Value: 0.40, At: at(30), Valid: true}, h.SMActive)
	assert.Equal(t, GaugeReading{Value: 83, At: at(30), Valid: true}, h.TemperatureC)
	assert.Equal(t, ThrottleReading{Reasons: []string{"hw_slowdown", "sw_thermal_slowdown"}, At: at(30), Valid: true}, h.ThrottleReasons)
	assert.Equal(t, CounterDelta{Delta: 5, Since: at(10), Until: at(30), Valid: true}, h.Counters[NVLinkCRCFlitErrors])
	assert.Equal(t, uint64(1), h.Counters[ECCDBEVolatile].Delta)
	assert.False(t, h.Counters[ECCSBEVolatile].Valid, "never reported")
	assert.Empty(t, h.XIDs)

	h, ok = s.GPUHealth(uuid0, at(35), at(45))
	require.True(t, ok)
	assert.Equal(t, GaugeReading{Value: 84, At: at(40), Valid: true}, h.TemperatureC)
	assert.Equal(t, GaugeReading{Value: 0.40, At: at(30), Valid: true}, h.SMActive, "kept from the earlier reading")
	assert.Equal(t, uint64(0), h.Counters[NVLinkCRCFlitErrors].Delta)

	// A returned slice is the caller's: changing it changes nothing stored.
	h, _ = s.GPUHealth(uuid0, at(30), at(30))
	h.ThrottleReasons.Reasons[0] = "changed"
	h, _ = s.GPUHealth(uuid0, at(30), at(30))
	assert.Equal(t, "hw_slowdown", h.ThrottleReasons.Reasons[0])
}

func TestGPUHealthWithoutData(t *testing.T) {
	s, clock := newTestStore(DefaultLimits())
	clock.Set(at(100))
	_, ok := s.GPUHealth(uuid0, at(0), at(100))
	assert.False(t, ok, "unknown GPU")

	s.RecordGPU(uuid0, at(50), gpuSample(0.9, 60, 0, 0))
	_, ok = s.GPUHealth(uuid0, at(10), at(20))
	assert.False(t, ok, "a window before any data")
	_, ok = s.GPUHealth(uuid0, at(60), at(55))
	assert.False(t, ok, "from after to")

	h, ok := s.GPUHealth(uuid0, at(40), at(60))
	require.True(t, ok)
	assert.True(t, h.Counters[NVLinkCRCFlitErrors].Partial, "no reading before the window")
}

func TestGPUHealthCounterReset(t *testing.T) {
	s, clock := newTestStore(DefaultLimits())
	clock.Set(at(100))
	s.RecordGPU(uuid0, at(10), gpuSample(1, 1, 1000, 0))
	s.RecordGPU(uuid0, at(20), gpuSample(1, 1, 1010, 0))
	// Driver reload: the volatile counter starts again from 0 and has 4 now.
	s.RecordGPU(uuid0, at(30), gpuSample(1, 1, 4, 0))
	s.RecordGPU(uuid0, at(40), gpuSample(1, 1, 6, 0))
	h, ok := s.GPUHealth(uuid0, at(10), at(40))
	require.True(t, ok)
	assert.Equal(t, uint64(10+4+2), h.Counters[NVLinkCRCFlitErrors].Delta)
	assert.Equal(t, 1, h.Counters[NVLinkCRCFlitErrors].Resets)
}

func TestGPUHealthOutOfOrder(t *testing.T) {
	s, clock := newTestStore(DefaultLimits())
	clock.Set(at(100))
	for _, i := range []int{3, 1, 4, 0, 2} {
		s.RecordGPU(uuid0, at(10*i), gpuSample(float64(i)/10, 50, uint64(i*i), 0))
	}
	h, ok := s.GPUHealth(uuid0, at(10), at(30))
	require.True(t, ok)
	assert.Equal(t, uint64(9-1), h.Counters[NVLinkCRCFlitErrors].Delta)
	assert.InDelta(t, 0.3, h.SMActive.Value, 1e-12)
}

func TestGPUHealthXIDs(t *testing.T) {
	s, clock := newTestStore(DefaultLimits())
	clock.Set(at(100))
	// Log records: two XID 79 inside the window, one outside.
	s.RecordXID(uuid0, at(12), 79)
	s.RecordXID(uuid0, at(14), 79)
	s.RecordXID(uuid0, at(50), 79)
	// gpu.xid.errors: 79 grew by 1 (fewer than the records: max wins), 48 by 2
	// (no records: the counter alone), 13 not at all.
	counters := func(x79, x48, x13 uint64) GPUSample {
		c := func(code int, n uint64) XIDCounter {
			return XIDCounter{Code: code, Count: Counter{Value: n, Start: t0, Valid: true}}
		}
		return GPUSample{XIDCounters: []XIDCounter{c(79, x79), c(48, x48), c(13, x13)}}
	}
	s.RecordGPU(uuid0, at(10), counters(0, 1, 7))
	s.RecordGPU(uuid0, at(20), counters(1, 3, 7))

	h, ok := s.GPUHealth(uuid0, at(10), at(20))
	require.True(t, ok)
	assert.Equal(t, []XIDCount{{Code: 48, Count: 2}, {Code: 79, Count: 2}}, h.XIDs)

	h, ok = s.GPUHealth(uuid0, at(21), at(49))
	require.True(t, ok)
	assert.Empty(t, h.XIDs)

	// An XID record alone makes the GPU known.
	s.RecordXID("GPU-only-xid", at(5), 119)
	h, ok = s.GPUHealth("GPU-only-xid", at(0), at(10))
	require.True(t, ok)
	assert.Equal(t, []XIDCount{{Code: 119, Count: 1}}, h.XIDs)
}

// dcgmreceiver lists a code in gpu.xid.errors only once it has been seen:
// a code first listed after a complete reading counts from 0 there.
func TestXIDCounterFirstAppearance(t *testing.T) {
	s, clock := newTestStore(DefaultLimits())
	clock.Set(at(100))
	xid := func(code int, n uint64, start time.Time) XIDCounter {
		return XIDCounter{Code: code, Count: Counter{Value: n, Start: start, Valid: true}}
	}
	// GPU a: complete readings at 10 (nothing yet) and 20 (one XID 48).
	s.RecordGPU("GPU-a", at(10), GPUSample{XIDCountersComplete: true})
	s.RecordGPU("GPU-a", at(20), GPUSample{XIDCountersComplete: true, XIDCounters: []XIDCounter{xid(48, 1, t0)}})
	h, ok := s.GPUHealth("GPU-a", at(15), at(20))
	require.True(t, ok)
	assert.Equal(t, []XIDCount{{Code: 48, Count: 1}}, h.XIDs)
	h, _ = s.GPUHealth("GPU-a", at(5), at(10))
	assert.Empty(t, h.XIDs, "it was not there before")

	// GPU b: the first reading ever already counts 5: when they happened is
	// unknown, so no window gets them.
	s.RecordGPU("GPU-b", at(20), GPUSample{XIDCountersComplete: true, XIDCounters: []XIDCounter{xid(119, 5, t0)}})
	h, ok = s.GPUHealth("GPU-b", at(0), at(20))
	require.True(t, ok)
	assert.Empty(t, h.XIDs)

	// GPU c: the last complete reading predates the counter's start (the
	// receiver restarted): no zero is assumed.
	s.RecordGPU("GPU-c", at(10), GPUSample{XIDCountersComplete: true})
	s.RecordGPU("GPU-c", at(20), GPUSample{XIDCountersComplete: true, XIDCounters: []XIDCounter{xid(79, 2, at(15))}})
	h, _ = s.GPUHealth("GPU-c", at(10), at(20))
	assert.Empty(t, h.XIDs)

	// GPU d: readings without the completeness mark assume nothing.
	s.RecordGPU("GPU-d", at(10), GPUSample{TemperatureC: Gauge{Value: 50, Valid: true}})
	s.RecordGPU("GPU-d", at(20), GPUSample{XIDCounters: []XIDCounter{xid(79, 2, t0)}})
	h, _ = s.GPUHealth("GPU-d", at(10), at(20))
	assert.Empty(t, h.XIDs)
}

func TestXIDCodesBounded(t *testing.T) {
	s, clock := newTestStore(DefaultLimits())
	clock.Set(at(100))
	var sample GPUSample
	for code := range MaxXIDCodesPerGPU + 10 {
		sample.XIDCounters = append(sample.XIDCounters, XIDCounter{Code: code, Count: Counter{Value: 1, Valid: true}})
	}
	s.RecordGPU(uuid0, at(1), sample)
	assert.Equal(t, uint64(10), s.Stats().Dropped)
}

func TestThrottleReasons(t *testing.T) {
	s, clock := newTestStore(DefaultLimits())
	clock.Set(at(100))
	long := strings.Repeat("x", MaxThrottleReasonLen+1)
	s.RecordGPU(uuid0, at(1), GPUSample{ThrottleValid: true, ThrottleReasons: []string{"b", "a", "b", "", long}})
	s.RecordGPU(uuid0, at(2), GPUSample{ThrottleValid: true, ThrottleReasons: []string{"a", "b"}})
	s.RecordGPU(uuid0, at(3), GPUSample{ThrottleValid: true})
	many := make([]string, 100)
	for i := range many {
		many[i] = fmt.Sprintf("r%03d", i)
	}
	s.RecordGPU(uuid0, at(4), GPUSample{ThrottleValid: true, ThrottleReasons: many})

	g, ok := s.gpus.get(uuid0)
	require.True(t, ok)
	th := g.throttle.samples
	require.Len(t, th, 4)
	assert.Equal(t, []string{"a", "b"}, th[0].v, "sorted, deduplicated, empty and long ones left out")
	assert.Same(t, &th[0].v[0], &th[1].v[0], "an unchanged set shares the earlier reading's slice")
	assert.Empty(t, th[2].v, "read, none active")
	assert.Len(t, th[3].v, MaxThrottleReasons)

	h, ok := s.GPUHealth(uuid0, at(3), at(3))
	require.True(t, ok)
	assert.True(t, h.ThrottleReasons.Valid)
	assert.Empty(t, h.ThrottleReasons.Reasons)
}

func TestRecordRefusesGarbage(t *testing.T) {
	s, clock := newTestStore(DefaultLimits())
	clock.Set(at(100))
	s.RecordGPU("", at(1), gpuSample(1, 1, 1, 1))
	s.RecordGPU(strings.Repeat("G", MaxKeyLen+1), at(1), gpuSample(1, 1, 1, 1))
	s.RecordGPU(uuid0, time.Time{}, gpuSample(1, 1, 1, 1))
	s.RecordXID(uuid0, at(100).Add(time.Hour), 79) // from the future
	s.RecordIB("mlx5_0", strings.Repeat("1", MaxKeyLen+1), at(1), IBSample{})
	s.RecordIB("", "1", at(1), IBSample{})
	st := s.Stats()
	assert.Equal(t, Stats{Dropped: 6}, st)

	// NaN and infinite gauges are not readings.
	s.RecordGPU(uuid0, at(1), GPUSample{SMActive: Gauge{Value: math.NaN(), Valid: true}, TemperatureC: Gauge{Value: math.Inf(1), Valid: true}})
	_, ok := s.GPUHealth(uuid0, at(0), at(2))
	assert.False(t, ok)
}

func TestNodeIBHealth(t *testing.T) {
	s, clock := newTestStore(DefaultLimits())
	clock.Set(at(100))
	ib := func(symbol, downed uint64) IBSample {
		var x IBSample
		x.Counters[IBSymbolErrors] = Counter{Value: symbol, Valid: true}
		x.Counters[IBLinkDowned] = Counter{Value: downed, Valid: true}
		return x
	}
	s.RecordIB("mlx5_1", "1", at(10), ib(100, 2))
	s.RecordIB("mlx5_0", "1", at(10), ib(0, 0))
	s.RecordIB("mlx5_0", "2", at(10), ib(7, 1))
	s.RecordIB("mlx5_1", "1", at(20), ib(130, 3))
	s.RecordIB("mlx5_0", "1", at(20), ib(5, 0))
	s.RecordIB("mlx5_0", "2", at(20), ib(7, 1))
	s.RecordIB("mlx5_9", "1", at(50), ib(1, 1)) // only after the window

	h, ok := s.NodeIBHealth(at(10), at(25))
	require.True(t, ok)
	assert.Equal(t, uint64(35), h.Totals[IBSymbolErrors])
	assert.Equal(t, uint64(1), h.Totals[IBLinkDowned])
	assert.Equal(t, uint64(0), h.Totals[IBLinkErrorRecovery])
	require.Len(t, h.Ports, 3)
	assert.Equal(t, [2]string{"mlx5_0", "1"}, [2]string{h.Ports[0].Device, h.Ports[0].Port})
	assert.Equal(t, [2]string{"mlx5_0", "2"}, [2]string{h.Ports[1].Device, h.Ports[1].Port})
	assert.Equal(t, [2]string{"mlx5_1", "1"}, [2]string{h.Ports[2].Device, h.Ports[2].Port})
	assert.Equal(t, CounterDelta{Delta: 30, Since: at(10), Until: at(20), Valid: true}, h.Ports[2].Counters[IBSymbolErrors])
	assert.False(t, h.Ports[2].Counters[IBPortRcvErrors].Valid)

	_, ok = s.NodeIBHealth(at(0), at(5))
	assert.False(t, ok, "a window before any data")
	_, ok = s.NodeIBHealth(at(5), at(0))
	assert.False(t, ok, "from after to")
}

func TestEvictionAtCapacity(t *testing.T) {
	var evicted []string
	clock := &fixedClock{now: at(100)}
	limits := DefaultLimits()
	limits.MaxGPUs, limits.MaxIBPorts = 2, 1
	s := NewMemoryStore(limits, withClock(clock.Now), WithEvictionHook(func(kind string, reason EvictionReason) {
		evicted = append(evicted, kind+"/"+string(reason))
	}))
	s.RecordGPU("GPU-a", at(1), gpuSample(1, 1, 0, 0))
	s.RecordGPU("GPU-b", at(1), gpuSample(1, 1, 0, 0))
	s.RecordXID("GPU-a", at(2), 13) // a is now the most recently recorded
	s.RecordGPU("GPU-c", at(1), gpuSample(1, 1, 0, 0))

	_, okA := s.GPUHealth("GPU-a", at(0), at(5))
	_, okB := s.GPUHealth("GPU-b", at(0), at(5))
	_, okC := s.GPUHealth("GPU-c", at(0), at(5))
	assert.Equal(t, []bool{true, false, true}, []bool{okA, okB, okC}, "the least recently recorded goes")

	s.RecordIB("mlx5_0", "1", at(1), IBSample{})
	s.RecordIB("mlx5_0", "2", at(1), IBSample{})
	assert.Equal(t, []string{"gpu/capacity", "ib_port/capacity"}, evicted)
	assert.Equal(t, Stats{GPUs: 2, IBPorts: 1, EvictedGPUs: 1, EvictedIBPorts: 1}, s.Stats())
}

func TestEvictionWhenIdle(t *testing.T) {
	limits := DefaultLimits()
	s, clock := newTestStore(limits)
	s.RecordGPU("GPU-gone", at(0), gpuSample(1, 1, 0, 0))
	s.RecordIB("mlx5_gone", "1", at(0), IBSample{})
	clock.Set(at(0).Add(limits.Retention + time.Second))
	s.RecordGPU("GPU-new", at(700), gpuSample(1, 1, 0, 0))
	s.RecordIB("mlx5_new", "1", at(700), IBSample{})
	_, ok := s.GPUHealth("GPU-gone", at(0), at(1))
	assert.False(t, ok)
	assert.Equal(t, Stats{GPUs: 1, IBPorts: 1, EvictedGPUs: 1, EvictedIBPorts: 1}, s.Stats())
}

func TestReset(t *testing.T) {
	s, clock := newTestStore(DefaultLimits())
	clock.Set(at(100))
	s.RecordGPU(uuid0, at(1), gpuSample(1, 1, 0, 0))
	s.RecordIB("mlx5_0", "1", at(1), IBSample{})
	s.Reset()
	assert.Equal(t, 0, s.Stats().GPUs)
	assert.Equal(t, 0, s.Stats().IBPorts)
}

func TestLimitsRaisedToMinimum(t *testing.T) {
	s := NewMemoryStore(Limits{})
	assert.Equal(t, Limits{Retention: time.Nanosecond, MaxGPUs: 1, MaxIBPorts: 1, MaxSamplesPerSeries: 2, MaxXIDEventsPerGPU: 1}, s.limits)
}

// A job (or a bug) that sends a million GPU uuids and a million ports must
// not grow the store past its bounds.
func TestMemoryBoundedUnderGarbage(t *testing.T) {
	s, clock := newTestStore(DefaultLimits())
	clock.Set(at(100))
	s.RecordGPU(uuid0, at(1), gpuSample(1, 1, 0, 0))

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const n = 1_000_000
	for i := range n {
		id := fmt.Sprintf("GPU-%036d", i)
		s.RecordGPU(id, at(i%90), gpuSample(1, 1, uint64(i), 0, "sw_power_cap"))
		s.RecordXID(id, at(i%90), i)
		s.RecordIB(id, "1", at(i%90), IBSample{})
	}
	runtime.GC()
	runtime.ReadMemStats(&after)

	st := s.Stats()
	assert.Equal(t, 64, st.GPUs)
	assert.Equal(t, 64, st.IBPorts)
	assert.Equal(t, uint64(n+1-64), st.EvictedGPUs)
	growth := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	assert.Less(t, growth, int64(8<<20), "heap grew by %d bytes", growth)
}

// Writers (metrics and logs pipelines) and readers (traces pipeline) at
// once; run with -race.
func TestConcurrentRecordAndQuery(t *testing.T) {
	s, clock := newTestStore(DefaultLimits())
	clock.Set(at(1000))
	const gpus, readings = 8, 200
	var wg sync.WaitGroup
	for g := range gpus {
		uuid := fmt.Sprintf("GPU-%d", g)
		wg.Add(3)
		go func() {
			defer wg.Done()
			for i := range readings {
				s.RecordGPU(uuid, at(i), gpuSample(0.5, 60, uint64(i), 0, "sw_power_cap"))
			}
		}()
		go func() {
			defer wg.Done()
			for i := range readings {
				s.RecordXID(uuid, at(i), 79)
				s.RecordIB(uuid, "1", at(i), IBSample{Counters: [NumIBCounters]Counter{{Value: uint64(i), Valid: true}}})
			}
		}()
		go func() {
			defer wg.Done()
			for i := range readings {
				if h, ok := s.GPUHealth(uuid, at(0), at(i)); ok {
					assert.LessOrEqual(t, h.Counters[NVLinkCRCFlitErrors].Delta, uint64(i))
				}
				s.NodeIBHealth(at(0), at(i))
				s.Stats()
			}
		}()
	}
	wg.Wait()
	for g := range gpus {
		h, ok := s.GPUHealth(fmt.Sprintf("GPU-%d", g), at(0), at(readings-1))
		require.True(t, ok)
		assert.Equal(t, uint64(readings-1), h.Counters[NVLinkCRCFlitErrors].Delta)
		assert.Equal(t, []XIDCount{{Code: 79, Count: readings}}, h.XIDs)
	}
	ib, ok := s.NodeIBHealth(at(0), at(readings-1))
	require.True(t, ok)
	assert.Equal(t, uint64(gpus*(readings-1)), ib.Totals[IBSymbolErrors])
}

// Any sequence of records and queries leaves the store within its bounds
// and never panics.
func FuzzStore(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	f.Add([]byte{0xff, 0, 0xff, 0, 0x80, 0x7f, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3})
	f.Fuzz(func(t *testing.T, ops []byte) {
		limits := Limits{Retention: 30 * time.Second, MaxGPUs: 3, MaxIBPorts: 2, MaxSamplesPerSeries: 4, MaxXIDEventsPerGPU: 3}
		s := NewMemoryStore(limits, withClock(func() time.Time { return at(200) }))
		for len(ops) >= 4 {
			op, key, tm := ops[0], ops[1]%5, int(int8(ops[2]))
			val := uint64(binary.BigEndian.Uint16([]byte{ops[3], op}))
			ops = ops[4:]
			id := fmt.Sprintf("GPU-%d", key)
			switch op % 5 {
			case 0:
				s.RecordGPU(id, at(tm), gpuSample(float64(val), float64(val), val, val%3, id))
			case 1:
				s.RecordXID(id, at(tm), int(val))
			case 2:
				s.RecordIB("mlx5_0", id, at(tm), IBSample{Counters: [NumIBCounters]Counter{{Value: val, Valid: true}}})
			case 3:
				if h, ok := s.GPUHealth(id, at(tm), at(tm+int(val%64))); ok {
					require.True(t, h.Counters[NVLinkCRCFlitErrors].Since.Compare(h.Counters[NVLinkCRCFlitErrors].Until) <= 0)
				}
			case 4:
				if h, ok := s.NodeIBHealth(at(tm), at(tm+int(val%64))); ok {
					require.LessOrEqual(t, len(h.Ports), limits.MaxIBPorts)
				}
			}
		}
		st := s.Stats()
		require.LessOrEqual(t, st.GPUs, limits.MaxGPUs)
		require.LessOrEqual(t, st.IBPorts, limits.MaxIBPorts)
		s.gpus.each(func(g *gpuState) {
			require.LessOrEqual(t, len(g.smActive.samples), limits.MaxSamplesPerSeries)
			require.LessOrEqual(t, len(g.xidEvents.samples), limits.MaxXIDEventsPerGPU)
		})
	})
}
