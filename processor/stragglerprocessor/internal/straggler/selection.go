package straggler

import (
	"math"
	"math/bits"
	"slices"
)

// selectKth reorders a so that a[k] is the k-th smallest value (0-based),
// everything before it is <= a[k] and everything after it is >= a[k], and
// returns a[k]. It runs in linear expected time (quickselect, median-of-three
// pivot) and falls back to sorting the remaining range when partitioning
// stops making progress, so adversarial inputs cost O(n log n), not O(n²).
// k must be within [0, len(a)).
func selectKth(a []int64, k int) int64 {
	lo, hi := 0, len(a)-1
	budget := 2 * bits.Len(uint(len(a))) // rounds before giving up on quickselect
	for lo < hi {
		if budget == 0 {
			slices.Sort(a[lo : hi+1])
			return a[k]
		}
		budget--
		lt, gt := partition(a, lo, hi)
		switch {
		case k < lt:
			hi = lt - 1
		case k > gt:
			lo = gt + 1
		default:
			return a[k] // k falls within the run of values equal to the pivot
		}
	}
	return a[k]
}

// partition splits a[lo:hi+1] around the median of a[lo], a[mid], a[hi]
// into values below, equal to and above it, and returns the bounds [lt, gt]
// of the equal run, which is in its final place. The three-way split keeps
// runs of identical durations (common: quantised timers) linear.
func partition(a []int64, lo, hi int) (lt, gt int) {
	mid := lo + (hi-lo)/2
	if a[mid] < a[lo] {
		a[mid], a[lo] = a[lo], a[mid]
	}
	if a[hi] < a[lo] {
		a[hi], a[lo] = a[lo], a[hi]
	}
	if a[hi] < a[mid] {
		a[hi], a[mid] = a[mid], a[hi]
	}
	pivot := a[mid]
	// Dutch national flag: [lo,lt) < pivot, [lt,i) == pivot, (gt,hi] > pivot.
	lt, gt = lo, hi
	for i := lo; i <= gt; {
		switch {
		case a[i] < pivot:
			a[lt], a[i] = a[i], a[lt]
			lt++
			i++
		case a[i] > pivot:
			a[i], a[gt] = a[gt], a[i]
			gt--
		default:
			i++
		}
	}
	return lt, gt
}

// median returns the median of a as a float64 (the mean of the two middle
// values for an even length), reordering a. It returns 0 for an empty slice.
func median(a []int64) float64 {
	n := len(a)
	if n == 0 {
		return 0
	}
	k := n / 2
	upper := selectKth(a, k)
	if n%2 == 1 {
		return float64(upper)
	}
	// After selection a[:k] holds the k smallest values; its maximum is the
	// lower middle value.
	lower := a[0]
	for _, v := range a[1:k] {
		lower = max(lower, v)
	}
	return float64(lower)/2 + float64(upper)/2
}

// nearestRank returns the q-quantile of a by the nearest-rank method (the
// smallest value with at least q·n values at or below it), reordering a.
// It returns 0 for an empty slice.
func nearestRank(a []int64, q float64) int64 {
	n := len(a)
	if n == 0 {
		return 0
	}
	k := int(math.Ceil(q*float64(n)-1e-9)) - 1 // the epsilon absorbs float error in q·n
	k = min(max(k, 0), n-1)
	return selectKth(a, k)
}
