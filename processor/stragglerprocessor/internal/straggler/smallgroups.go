package straggler

import (
	"math"
	"time"
)

// The rules of issue 30: the job's pace without the rank judged, a rank
// alone on its inferred level judged against the job, the slower of a pair
// against its peer, and a rank's own swings measured against its own noise.

// normalise sets j.own from j.raw: each rank's ratio over its own baseline
// divided by the job's pace, the median of the other ranks' ratios (a
// checkpoint slows every rank alike). Leaving the rank out keeps one slow
// rank of a tiny job from setting the pace it is judged by: of two ranks,
// one 2x, the median of both is 1.5 and brought it down to 1.33x. Leaving
// it out may only lower the median of all, and not below 1: the job did
// not speed up because a rank slowed, and a rank does not slow because a
// peer sped up. j.scaled holds the raw ratios (scaled) of the
// ranks with a baseline; it returns the median over all of them.
func (j *Job) normalise() float64 {
	m := len(j.scaled)
	pace := median(j.scaled) / ratioScale
	// The remaining m-1 ratios' median needs the order statistics
	// q0..q0+2 of all m around the middle.
	r := m - 1
	q0 := max(r/2-1, 0)
	var v [3]int64
	if m >= 2 {
		v[0] = selectKth(j.scaled, q0)
		v[1], v[2] = math.MaxInt64, math.MaxInt64
		for _, x := range j.scaled[q0+1:] {
			if x < v[1] {
				v[1], v[2] = x, v[1]
			} else if x < v[2] {
				v[2] = x
			}
		}
	}
	for i := range j.raw {
		j.own[i] = -1
		if j.raw[i] < 0 {
			continue
		}
		p := pace
		if m >= 2 {
			x := saturate(j.raw[i] * ratioScale)
			// The q-th of the others: a copy of x taken out of the sorted
			// ratios shifts those at or above it down by one.
			rest := func(q int) float64 {
				if v[q-q0] < x {
					return float64(v[q-q0])
				}
				return float64(v[q-q0+1])
			}
			loo := rest(r / 2)
			if r%2 == 0 {
				loo = (rest(r/2-1) + rest(r/2)) / 2
			}
			p = max(min(loo/ratioScale, pace), min(pace, 1))
		}
		if p > 0 {
			j.own[i] = j.raw[i] / p
		}
	}
	return pace
}

// singlesJudgedByJob reports whether, this step, a rank alone on its
// inferred level is judged against the job: while no more ranks are alone
// than there are levels holding several ranks, a level of one is no stage
// (stages and tensor groups come in equal sizes) but a rank slow since
// the job's first steps. It sets j.singleRef, the slowest median of the
// groups of several ranks (the job's slowest stage), and j.singleScale,
// their median relative MAD: the step's noise, not the stages' spread.
func (j *Job) singlesJudgedByJob(d *StepDecision) bool {
	j.singleRef = 0
	newcomer, hasNew := j.groupIdx[newcomerGroup]
	singles, several := 0, 0
	j.scaled = j.scaled[:0]
	for g, size := range j.groupSize {
		if hasNew && int32(g) == newcomer {
			continue
		}
		switch {
		case size == 1:
			singles++
		case size >= 2:
			several++
			if st := &d.Groups[g]; st.Median > 0 {
				j.singleRef = max(j.singleRef, float64(st.Median))
				j.scaled = append(j.scaled, saturate(float64(st.MAD)/float64(st.Median)*ratioScale))
			}
		}
	}
	if singles == 0 || singles > several {
		return false
	}
	j.singleScale = median(j.scaled) / ratioScale
	return true
}

// smallGroupFlag flags sample i when its group is too small for median and
// MAD: alone on an inferred level, against the job; one of two, against
// its peer. Nil otherwise.
func (j *Job) smallGroupFlag(work []RankSample, d *StepDecision, i int) *Flag {
	switch j.groupSize[j.group[i]] {
	case 1:
		if j.judgeSingles && work[i].Group != newcomerGroup {
			return j.singleFlag(work, i)
		}
	case 2:
		return j.pairFlag(work, d, i)
	}
	return nil
}

// singleFlag: a rank alone on its level, at least MinExcess (and its own
// noise) over the job's slowest stage (the slowest median of the groups of
// several ranks) and ZThreshold robust deviations of the groups' spread
// above it. A level of one between stages' levels may be a slow rank of a
// faster stage or a fast one of a slower stage, and holds no one up: it is
// left alone (so is the faster half of a bimodal job's slow ranks).
func (j *Job) singleFlag(work []RankSample, i int) *Flag {
	o := j.opts.Detect
	med := j.singleRef
	x := float64(nonNegative(work[i].Compute))
	if med <= 0 {
		return nil
	}
	excess := x/med - 1
	z := madToSigma * excess / max(j.singleScale, o.MADFloor)
	if excess < o.MinExcess || z < o.ZThreshold || excess < j.noiseExcess(i, o.MinExcess) {
		return nil
	}
	s := &work[i]
	f := Flag{Rank: s.Rank, Group: s.Group, Kind: KindCompute, Link: s.Link, Score: z,
		Compute: time.Duration(nonNegative(s.Compute)), GroupMedianCompute: durationOf(med), ComputeRatio: x / med,
		Wait: time.Duration(nonNegative(s.CollectiveWait))}
	f.GroupMedianWait = j.medianWait(work)
	f.WaitRatio = ratio(float64(f.Wait), float64(f.GroupMedianWait))
	return &f
}

// pairFlag: the slower of a group of two, SelfExcess (and its own noise)
// over its peer, while the peer is steady (within MinExcess of its own
// baseline): two ranks have no majority, but a peer that did not move
// says which one did.
func (j *Job) pairFlag(work []RankSample, d *StepDecision, i int) *Flag {
	g := j.group[i]
	members := j.order[j.starts[g]:j.starts[g+1]]
	p := int(members[0])
	if p == i {
		p = int(members[1])
	}
	o := j.opts
	peerRaw := j.raw[p]
	if peerRaw < 0 || peerRaw > 1+o.Detect.MinExcess || peerRaw*(1+o.Detect.MinExcess) < 1 {
		return nil
	}
	x, y := float64(nonNegative(work[i].Compute)), float64(nonNegative(work[p].Compute))
	if y <= 0 || x/y < 1+o.SelfExcess || x/y < 1+j.noiseExcess(i, o.SelfExcess) {
		return nil
	}
	s := &work[i]
	f := Flag{Rank: s.Rank, Group: s.Group, Kind: KindCompute, Link: s.Link, Score: d.Ranks[i].Score,
		Compute: time.Duration(x), GroupMedianCompute: time.Duration(y), ComputeRatio: x / y,
		Wait: time.Duration(nonNegative(s.CollectiveWait)), GroupMedianWait: time.Duration(nonNegative(work[p].CollectiveWait))}
	f.WaitRatio = ratio(float64(f.Wait), float64(f.GroupMedianWait))
	return &f
}

// slowerThanGroup: a rank's own history alone does not make it a
// straggler while it is no slower than its group (issue 30: the fast half
// of a half-slow job spiking over its own level, still faster than the
// slow half). Where the group can flag (MinGroupSize ranks or more) the
// rank must be above its median; a smaller group is compared with the
// other groups by the job's pace instead (peerCalm), but a rank alone on
// its inferred level that is judged against the job must be above the
// job's median.
func (j *Job) slowerThanGroup(d *StepDecision, i int, compute time.Duration) bool {
	st := &d.Groups[j.group[i]]
	switch {
	case st.Ranks >= j.opts.Detect.MinGroupSize:
		return nonNegative(compute) > int64(st.Median)
	case st.Ranks == 1 && j.judgeSingles:
		return nonNegative(compute) > int64(d.Summary.Median)
	}
	return true
}

// noiseExcess is the excess over its own baseline that rank i needs to
// stand out of its own noise: floor, or ZThreshold robust deviations of its
// remembered times (their MAD over their median; for a rank that was noisy
// among stable ones when the groups were inferred, at least that first
// spread, since 15 times can look quiet by chance), whichever is larger. A
// rank whose times swing 15-20 % step to step is not flagged for its swings
// (issue 30); a steady rank (1-3 %) needs floor.
func (j *Job) noiseExcess(i int, floor float64) float64 {
	h := j.historyAt(j.hist[i])
	if h == nil || int(h.n) < j.opts.Warmup {
		return floor
	}
	s := h.spread()
	if math.IsInf(s, 0) || math.IsNaN(s) {
		return floor
	}
	s = max(s, float64(h.warmNoise)/100)
	return max(floor, j.opts.Detect.ZThreshold*s/madToSigma)
}

// medianWait is the median collective wait over the step's ranks that have
// a comparable one (0 with none).
func (j *Job) medianWait(work []RankSample) time.Duration {
	j.scaled = j.scaled[:0]
	for k := range work {
		if !work[k].NoWait {
			j.scaled = append(j.scaled, nonNegative(work[k].CollectiveWait))
		}
	}
	return durationOf(median(j.scaled))
}
