package straggler

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"time"
)

// inferGroups clusters the ranks' levels (their baselines after Warmup
// steps): sorted, split where neighbours differ by more than StageGap and
// both are stable. Ranks without a baseline yet are placed later.
func (j *Job) inferGroups() {
	type level struct {
		rank   int
		level  float64
		stable bool
	}
	var levels []level
	for r := range j.ranks {
		h := &j.ranks[r]
		if !h.seen || int(h.n) < j.opts.Warmup {
			continue
		}
		if b := h.baseline(); b > 0 {
			h.stable = h.spread() <= stableSpread
			levels = append(levels, level{rank: r, level: b, stable: h.stable})
		}
	}
	slices.SortFunc(levels, func(a, b level) int { return cmp.Compare(a.level, b.level) })
	j.levels = []float64{}
	sum, count := 0.0, 0
	for i, l := range levels {
		if i > 0 && l.level > levels[i-1].level*(1+j.opts.StageGap) && l.stable && levels[i-1].stable {
			j.levels = append(j.levels, sum/float64(count))
			sum, count = 0, 0
		}
		j.ranks[l.rank].group = int32(len(j.levels))
		sum += l.level
		count++
	}
	if count > 0 {
		j.levels = append(j.levels, sum/float64(count))
	}
	j.names = make([]string, len(j.levels))
	for g := range j.names {
		j.names[g] = inferredPrefix + strconv.Itoa(g)
	}
}

// inferredName returns the inferred group of a sample's rank, placing a
// rank first seen after inference by the level nearest its baseline once
// it has one.
func (j *Job) inferredName(hi int32, own float64, compute time.Duration, pace float64) string {
	h := j.historyAt(hi)
	if h == nil || len(j.levels) == 0 {
		return newcomerGroup
	}
	if h.group < 0 {
		if int(h.n) < j.opts.Warmup {
			return newcomerGroup
		}
		b := h.baseline()
		best, bestDist := int32(-1), math.Inf(1)
		for g, l := range j.levels {
			if d := math.Abs(math.Log(b / l)); d < bestDist {
				best, bestDist = int32(g), d
			}
		}
		if best < 0 {
			return newcomerGroup
		}
		h.group = best
	}
	return j.names[h.group]
}
