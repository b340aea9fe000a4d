package straggler

import (
	"math"
	"slices"
)

const (
	// minRobustRun: a gap narrower than StageGap splits the sorted levels
	// (splitLevels) only with at least this many levels beside it on each
	// side.
	minRobustRun = 8
	// robustGapMADs: ... and the gap between the two sides is at least this
	// many times the larger side's median absolute deviation (splitLevels).
	robustGapMADs = 6
	// minRobustGap: ... and at least this fraction of the lower level.
	minRobustGap = 0.05
)

// splitLevels splits sorted levels into groups and returns each group's
// end (exclusive), ascending; the last is len(sorted). Neighbours further
// apart than gap (a fraction of the lower) always split. A narrower gap
// splits where it is wide against the levels beside it: those within gap
// of its lower edge below it and of its upper edge above it (within the
// same run) number at least minRobustRun on each side, and the gap is at
// least minRobustGap of the lower level and robustGapMADs times the larger
// side's median absolute deviation. So stages of many ranks, whose
// extremes come closer to the next stage's than gap (256-rank stages 20%
// apart: issue 30), still split, while one group's spread-out levels do
// not: a gap among them is narrow against the levels beside it.
func splitLevels(sorted []float64, gap float64) []int {
	var ends []int
	first := 0
	for i := 1; i <= len(sorted); i++ {
		if i < len(sorted) && sorted[i] <= sorted[i-1]*(1+gap) {
			continue
		}
		run := sorted[first:i]
		for k := 1; k < len(run); k++ {
			if wideGap(run, k, gap) {
				ends = append(ends, first+k)
			}
		}
		ends = append(ends, i)
		first = i
	}
	return ends
}

// wideGap reports whether the gap between run[k-1] and run[k] splits run
// (splitLevels).
func wideGap(run []float64, k int, gap float64) bool {
	below, above := run[k-1], run[k]
	if below <= 0 || above < below*(1+minRobustGap) {
		return false
	}
	a := k - 1
	for a > 0 && run[a-1] >= below*(1-gap) {
		a--
	}
	b := k + 1
	for b < len(run) && run[b] <= above*(1+gap) {
		b++
	}
	if k-a < minRobustRun || b-k < minRobustRun {
		return false
	}
	return above-below >= robustGapMADs*max(absMAD(run[a:k]), absMAD(run[k:b]))
}

// absMAD is the median absolute deviation of sorted xs from their median.
func absMAD(xs []float64) float64 {
	med := xs[(len(xs)-1)/2]
	dev := make([]float64, len(xs))
	for k, x := range xs {
		dev[k] = math.Abs(x - med)
	}
	slices.Sort(dev)
	return dev[(len(dev)-1)/2]
}
