package straggler

import (
	"cmp"
	"math"
	"slices"
	"strconv"
)

// inferGroups clusters the ranks' levels (their baselines after Warmup
// steps). The stable ranks (their first times deviate from their median
// by at most stableSpread) draw the groups: sorted, their levels are split
// where neighbours differ by more than StageGap or by a gap wide against
// the levels beside it (splitLevels), and a group's level is the
// median of its members'. Every other rank joins the group whose level is
// nearest its own. So a few noisy ranks can neither merge two stages (a
// noisy level between them used to bridge the gap: issue 30) nor split
// one; with no stable rank at all the job is one group. Ranks without a
// baseline yet are placed later (inferredName).
func (j *Job) inferGroups() {
	type level struct {
		rank  int
		level float64
	}
	var anchors, noisy []level
	for r := range j.ranks {
		h := &j.ranks[r]
		if !h.seen || int(h.n) < j.opts.Warmup {
			continue
		}
		if b := h.baseline(); b > 0 {
			if sp := h.spread(); sp <= stableSpread {
				anchors = append(anchors, level{rank: r, level: b})
			} else {
				noisy = append(noisy, level{rank: r, level: b})
				h.warmNoise = uint8(min(math.Round(sp*100), 255))
			}
		}
	}
	if len(anchors) == 0 {
		// Nothing stable to split by: one group, at the median level.
		anchors, noisy = noisy, nil
		for _, l := range anchors {
			j.ranks[l.rank].warmNoise = 0 // noisy like every other rank
		}
		slices.SortFunc(anchors, func(a, b level) int { return cmp.Compare(a.level, b.level) })
		j.levels = []float64{}
		if len(anchors) > 0 {
			j.levels = append(j.levels, anchors[len(anchors)/2].level)
		}
		for _, l := range anchors {
			j.ranks[l.rank].group = 0
		}
		j.nameGroups()
		j.stageLike = false // nothing stable: no stage to trust
		return
	}
	slices.SortFunc(anchors, func(a, b level) int { return cmp.Compare(a.level, b.level) })
	sorted := make([]float64, len(anchors))
	for i, l := range anchors {
		sorted[i] = l.level
	}
	j.levels = []float64{}
	first := 0
	for _, end := range splitLevels(sorted, j.opts.StageGap) {
		for _, l := range anchors[first:end] {
			j.ranks[l.rank].group = int32(len(j.levels))
		}
		j.levels = append(j.levels, anchors[(first+end-1)/2].level)
		first = end
	}
	for _, l := range noisy {
		j.ranks[l.rank].group = j.nearestLevel(l.level)
	}
	j.nameGroups()

	// Stage-like: the groups of several ranks are of one size (give or take
	// the ranks alone, and a tenth) and each one's anchors agree within
	// stageSpread (median absolute deviation) and their middle 80% within
	// stageRange: levels drawn evenly from 3-4x can by chance keep their
	// MAD under stageSpread, never their middle 80% under stageRange (issue
	// 30, half_slow_fast_spikes seed 30004).
	sizes := make([]int, len(j.levels))
	for r := range j.ranks {
		if g := j.ranks[r].group; g >= 0 {
			sizes[g]++
		}
	}
	singles, lo, hi := 0, math.MaxInt, 0
	for _, n := range sizes {
		if n == 1 {
			singles++
		} else if n > 1 {
			lo, hi = min(lo, n), max(hi, n)
		}
	}
	j.stageLike = hi == 0 || hi-lo <= max(1, singles, (hi+9)/10)
	first = 0
	for i := 1; i <= len(anchors) && j.stageLike; i++ {
		if i < len(anchors) && j.ranks[anchors[i].rank].group == j.ranks[anchors[first].rank].group {
			continue
		}
		if i-first >= 2 && (relativeMAD(anchors[first:i], func(l level) float64 { return l.level }) > stageSpread ||
			interDecile(sorted[first:i]) > stageRange) {
			j.stageLike = false
		}
		first = i
	}
}

// interDecile is the spread of the middle 80% of sorted xs (the 90th
// percentile less the 10th, each the nearest level inward) over their
// median; 0 for a zero median.
func interDecile(xs []float64) float64 {
	med := xs[(len(xs)-1)/2]
	if med <= 0 {
		return 0
	}
	n := len(xs) - 1
	return (xs[n*9/10] - xs[(n+9)/10]) / med
}

// relativeMAD is the median absolute deviation of xs' values from their
// median, over the median (xs sorted by value; 0 for a zero median).
func relativeMAD[T any](xs []T, value func(T) float64) float64 {
	med := value(xs[(len(xs)-1)/2])
	if med <= 0 {
		return 0
	}
	dev := make([]float64, len(xs))
	for k, x := range xs {
		dev[k] = math.Abs(value(x) - med)
	}
	slices.Sort(dev)
	return dev[(len(dev)-1)/2] / med
}

func (j *Job) nameGroups() {
	j.names = make([]string, len(j.levels))
	for g := range j.names {
		j.names[g] = inferredPrefix + strconv.Itoa(g)
	}
}

// nearestLevel returns the inferred group whose level is nearest b (by
// ratio); -1 when there is none.
func (j *Job) nearestLevel(b float64) int32 {
	best, bestDist := int32(-1), math.Inf(1)
	for g, l := range j.levels {
		if d := math.Abs(math.Log(b / l)); d < bestDist {
			best, bestDist = int32(g), d
		}
	}
	return best
}

// inferredName returns the inferred group of a sample's rank, placing a
// rank first seen after inference (or missing from a warm-up step) by the
// level nearest its baseline once it has one; a baseline further than
// StageGap from every level is a level of its own, as it would have been
// at inference (a rank slow from the first step whose span missed a
// warm-up step must not join the slowest stage).
func (j *Job) inferredName(hi int32) string {
	h := j.historyAt(hi)
	if h == nil || len(j.levels) == 0 {
		return newcomerGroup
	}
	if h.group < 0 {
		if int(h.n) < j.opts.Warmup {
			return newcomerGroup
		}
		b := h.baseline()
		best := j.nearestLevel(b)
		if best < 0 {
			return newcomerGroup
		}
		if l := j.levels[best]; b > l*(1+j.opts.StageGap) || l > b*(1+j.opts.StageGap) {
			best = int32(len(j.levels))
			j.levels = append(j.levels, b)
			j.names = append(j.names, inferredPrefix+strconv.Itoa(int(best)))
		}
		h.group = best
	}
	return j.names[h.group]
}
