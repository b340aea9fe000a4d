package straggler

import (
	"math"
)

// rankHistory is what a Job remembers of one rank: its recent unflagged
// compute times (float32 nanoseconds: 7 significant digits are plenty for
// a median), the group it was inferred into and, for a noisy rank among
// stable ones, how noisy its first times were. 68 bytes.
type rankHistory struct {
	ring [baselineWindow]float32
	n    uint8 // values in ring
	next uint8
	seen bool
	// warmNoise: the spread of the first times in percent (capped at 255)
	// of a rank that was not stable when the groups were inferred while
	// others were; 0 otherwise (noiseExcess).
	warmNoise uint8
	group     int32 // inferred group; -1: not placed
}

func (h *rankHistory) push(ns int64) {
	h.ring[h.next] = float32(ns)
	h.next = (h.next + 1) % baselineWindow
	h.n = min(h.n+1, baselineWindow)
}

// baseline is the median of the remembered times (0 with none).
func (h *rankHistory) baseline() float64 {
	var v [baselineWindow]float32
	n := int(h.n)
	copy(v[:], h.ring[:n])
	sortSmall(v[:n])
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return float64(v[n/2])
	}
	return (float64(v[n/2-1]) + float64(v[n/2])) / 2
}

// sortSmall sorts at most baselineWindow times in place: an insertion sort
// with a plain comparison, which for 15 values is about twice as fast as
// slices.Sort's, whose float comparison also orders NaNs (the times are
// converted from integers and are never NaN). It runs for every rank of
// every decided step (BENCHMARKS.md, "Gateway overhead").
func sortSmall(v []float32) {
	for i := 1; i < len(v); i++ {
		x := v[i]
		j := i
		for ; j > 0 && x < v[j-1]; j-- {
			v[j] = v[j-1]
		}
		v[j] = x
	}
}

// spread is the median absolute deviation of the remembered times over
// their median (+Inf without times or with a zero median).
func (h *rankHistory) spread() float64 {
	b := h.baseline()
	if b <= 0 {
		return math.Inf(1)
	}
	var dev rankHistory
	for _, x := range h.ring[:h.n] {
		dev.push(int64(math.Abs(float64(x) - b)))
	}
	return dev.baseline() / b
}
