package nodestate // import "github.com/otelcol-gpu/otelcol-gpu/extension/nodestateextension/nodestate"

import (
	"slices"
	"sort"
	"time"
)

// sample is one reading at a time in Unix nanoseconds.
type sample[V any] struct {
	at int64
	v  V
}

// series is a time-ordered, bounded list of readings.
type series[V any] struct {
	samples []sample[V]
}

// add inserts a reading in time order (readings may arrive out of order; a
// second reading at the same time replaces the first, so data that passes
// twice counts once), then drops readings older than the newest minus
// retention and the oldest beyond maxLen.
func (s *series[V]) add(at int64, v V, retention int64, maxLen int) {
	n := len(s.samples)
	switch {
	case n == 0 || at > s.samples[n-1].at:
		s.samples = append(s.samples, sample[V]{at, v})
	default:
		i := sort.Search(n, func(i int) bool { return s.samples[i].at >= at })
		if s.samples[i].at == at {
			s.samples[i].v = v
			return
		}
		s.samples = slices.Insert(s.samples, i, sample[V]{at, v})
	}
	s.trim(retention, maxLen)
}

// trim drops the readings before newest-retention and the oldest beyond
// maxLen. Reslicing instead of copying keeps add amortised O(1): append
// moves the live readings to a new array when the old one is full, so the
// array never holds much more than maxLen readings.
func (s *series[V]) trim(retention int64, maxLen int) {
	n := len(s.samples)
	if n == 0 {
		return
	}
	cutoff := s.samples[n-1].at - retention
	drop := sort.Search(n, func(i int) bool { return s.samples[i].at >= cutoff })
	drop = max(drop, n-maxLen)
	if drop > 0 {
		clear(s.samples[:drop]) // release what the dropped readings reference
		s.samples = s.samples[drop:]
	}
}

// atOrBefore returns the index of the last reading at or before t, or -1.
func (s *series[V]) atOrBefore(t int64) int {
	return sort.Search(len(s.samples), func(i int) bool { return s.samples[i].at > t }) - 1
}

// firstAtOrAfter returns the index of the first reading at or after t, or
// len(samples).
func (s *series[V]) firstAtOrAfter(t int64) int {
	return sort.Search(len(s.samples), func(i int) bool { return s.samples[i].at >= t })
}

// latest returns the last reading at or before t.
func (s *series[V]) latest(t int64) (sample[V], bool) {
	i := s.atOrBefore(t)
	if i < 0 {
		return sample[V]{}, false
	}
	return s.samples[i], true
}

// counterValue is one reading of a cumulative counter; start is the series
// start time in Unix nanoseconds, 0 when unknown.
type counterValue struct {
	v     uint64
	start int64
}

// counterDelta is how much the counter grew over [from, to]; see
// CounterDelta.
func counterDelta(s *series[counterValue], from, to int64) CounterDelta {
	end := s.atOrBefore(to)
	if end < 0 {
		return CounterDelta{}
	}
	begin := s.atOrBefore(from)
	partial := begin < 0
	if partial {
		begin = s.firstAtOrAfter(from) // <= end: the reading at end is at or after from
	}
	d := CounterDelta{
		Since:   unixTime(s.samples[begin].at),
		Until:   unixTime(s.samples[end].at),
		Partial: partial,
		Valid:   true,
	}
	prev := s.samples[begin].v
	for i := begin + 1; i <= end; i++ {
		cur := s.samples[i].v
		if cur.v < prev.v || (cur.start != 0 && prev.start != 0 && cur.start > prev.start) {
			d.Resets++
			d.Delta = saturatingAdd(d.Delta, cur.v)
		} else {
			d.Delta = saturatingAdd(d.Delta, cur.v-prev.v)
		}
		prev = cur
	}
	return d
}

func saturatingAdd(a, b uint64) uint64 {
	if a+b < a {
		return ^uint64(0)
	}
	return a + b
}

// unixTime turns Unix nanoseconds back into a time, in UTC.
func unixTime(ns int64) time.Time {
	return time.Unix(0, ns).UTC()
}
