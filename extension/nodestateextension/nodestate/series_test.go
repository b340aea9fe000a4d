package nodestate

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const sec = int64(time.Second)

func times[V any](s *series[V]) []int64 {
	var out []int64
	for _, x := range s.samples {
		out = append(out, x.at/sec)
	}
	return out
}

func TestSeriesAddKeepsTimeOrder(t *testing.T) {
	var s series[int]
	for _, at := range []int64{5, 1, 3, 9, 7} {
		s.add(at*sec, int(at), 100*sec, 100)
	}
	assert.Equal(t, []int64{1, 3, 5, 7, 9}, times(&s))

	// A reading at a time already held replaces it: data that passes twice counts once.
	s.add(3*sec, 33, 100*sec, 100)
	assert.Equal(t, []int64{1, 3, 5, 7, 9}, times(&s))
	assert.Equal(t, 33, s.samples[1].v)
}

func TestSeriesTrimsByRetentionAndLength(t *testing.T) {
	var s series[int]
	for at := int64(0); at < 10; at++ {
		s.add(at*sec, 0, 4*sec, 100)
	}
	assert.Equal(t, []int64{5, 6, 7, 8, 9}, times(&s), "newest minus retention")

	// A reading older than the retention arrives late: it is dropped at once.
	s.add(1*sec, 0, 4*sec, 100)
	assert.Equal(t, []int64{5, 6, 7, 8, 9}, times(&s))

	var short series[int]
	for at := int64(0); at < 1000; at++ {
		short.add(at*sec, 0, 10000*sec, 3)
	}
	assert.Equal(t, []int64{997, 998, 999}, times(&short))
	assert.LessOrEqual(t, cap(short.samples), 8, "the array does not grow with the readings seen")
}

func TestSeriesLookups(t *testing.T) {
	var s series[int]
	for _, at := range []int64{10, 20, 30} {
		s.add(at*sec, int(at), 100*sec, 100)
	}
	assert.Equal(t, -1, s.atOrBefore(9*sec))
	assert.Equal(t, 0, s.atOrBefore(10*sec))
	assert.Equal(t, 1, s.atOrBefore(29*sec))
	assert.Equal(t, 2, s.atOrBefore(99*sec))
	assert.Equal(t, 0, s.firstAtOrAfter(0))
	assert.Equal(t, 1, s.firstAtOrAfter(11*sec))
	assert.Equal(t, 3, s.firstAtOrAfter(31*sec))
	r, ok := s.latest(25 * sec)
	require.True(t, ok)
	assert.Equal(t, 20, r.v)
	_, ok = s.latest(5 * sec)
	assert.False(t, ok)
}

func counterSeries(points ...[3]int64) *series[counterValue] {
	var s series[counterValue]
	for _, p := range points {
		s.add(p[0]*sec, counterValue{v: uint64(p[1]), start: p[2] * sec}, 1000*sec, 1000)
	}
	return &s
}

func TestCounterDelta(t *testing.T) {
	s := counterSeries([3]int64{10, 100, 1}, [3]int64{20, 104, 1}, [3]int64{30, 110, 1}, [3]int64{40, 111, 1})

	d := counterDelta(s, 15*sec, 35*sec)
	assert.Equal(t, CounterDelta{Delta: 10, Since: unixTime(10 * sec), Until: unixTime(30 * sec), Valid: true}, d,
		"from the last reading at or before the start to the last at or before the end")

	d = counterDelta(s, 20*sec, 20*sec)
	assert.Equal(t, uint64(0), d.Delta, "an empty window between readings")
	assert.True(t, d.Valid)

	d = counterDelta(s, 50*sec, 60*sec)
	assert.Equal(t, uint64(0), d.Delta, "a window after the last reading")
	assert.Equal(t, unixTime(40*sec), d.Since)

	d = counterDelta(s, 1*sec, 5*sec)
	assert.Equal(t, CounterDelta{}, d, "a window before any reading")

	d = counterDelta(s, 1*sec, 25*sec)
	assert.Equal(t, CounterDelta{Delta: 4, Since: unixTime(10 * sec), Until: unixTime(20 * sec), Partial: true, Valid: true}, d,
		"nothing before the start: counted from the first reading inside")
}

func TestCounterDeltaResets(t *testing.T) {
	// 100 -> 104 (+4), reset to 3 (+3), 3 -> 9 (+6).
	s := counterSeries([3]int64{10, 100, 1}, [3]int64{20, 104, 1}, [3]int64{30, 3, 25}, [3]int64{40, 9, 25})
	d := counterDelta(s, 10*sec, 40*sec)
	assert.Equal(t, uint64(13), d.Delta)
	assert.Equal(t, 1, d.Resets)

	// A later start time is a reset even when the value grew: 5 -> 7 after a
	// restart counts 7, not 2.
	s = counterSeries([3]int64{10, 5, 1}, [3]int64{20, 7, 15})
	d = counterDelta(s, 10*sec, 20*sec)
	assert.Equal(t, uint64(7), d.Delta)
	assert.Equal(t, 1, d.Resets)

	// Unknown start times never signal a reset.
	s = counterSeries([3]int64{10, 5, 0}, [3]int64{20, 7, 15}, [3]int64{30, 8, 0})
	d = counterDelta(s, 10*sec, 30*sec)
	assert.Equal(t, uint64(3), d.Delta)
	assert.Equal(t, 0, d.Resets)
}

func TestCounterDeltaOutOfOrder(t *testing.T) {
	inOrder := counterSeries([3]int64{10, 1, 1}, [3]int64{20, 2, 1}, [3]int64{30, 50, 1}, [3]int64{40, 52, 1})
	shuffled := counterSeries([3]int64{30, 50, 1}, [3]int64{10, 1, 1}, [3]int64{40, 52, 1}, [3]int64{20, 2, 1})
	assert.Equal(t, counterDelta(inOrder, 10*sec, 40*sec), counterDelta(shuffled, 10*sec, 40*sec))
	assert.Equal(t, uint64(51), counterDelta(shuffled, 10*sec, 40*sec).Delta)
}

func TestSaturatingAdd(t *testing.T) {
	assert.Equal(t, uint64(5), saturatingAdd(2, 3))
	assert.Equal(t, ^uint64(0), saturatingAdd(^uint64(0)-1, 3))
}
