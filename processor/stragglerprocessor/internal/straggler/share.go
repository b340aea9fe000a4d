package straggler

// capShare takes the compute flags of a share group with more than
// MaxSlowShare (and at least two) of its ranks slow out of j.final and
// d.Ranks. The share group is a labelled group of at least MinGroupSize
// ranks, else the whole job. It returns whether that happened and the
// largest share of two or more slow ranks.
func (j *Job) capShare(d *StepDecision, labelled bool) (exceeded bool, share float64) {
	o := j.opts
	n := len(d.Ranks)
	j.absorbed = resize(j.absorbed, n)
	clear(j.absorbed)
	jobKey := len(j.groupSize) // the job's own share group
	j.shareCnt = resize(j.shareCnt, jobKey+1)
	clear(j.shareCnt)
	shareGroup := func(i int) int {
		if g := int(j.group[i]); labelled && j.groupSize[g] >= o.Detect.MinGroupSize {
			return g
		}
		return jobKey
	}
	size := func(sg int) int {
		if sg == jobKey {
			return n
		}
		return j.groupSize[sg]
	}
	for i := range d.Ranks {
		if d.Ranks[i].Flagged && d.Ranks[i].Kind == KindCompute {
			j.shareCnt[shareGroup(i)]++
		}
	}
	for sg, c := range j.shareCnt {
		if c < 2 || size(sg) == 0 {
			continue
		}
		s := float64(c) / float64(size(sg))
		share = max(share, s)
		if s > o.MaxSlowShare {
			exceeded = true
		}
	}
	if !exceeded {
		return false, share
	}
	kept := j.final[:0]
	next := 0
	for i := range d.Ranks {
		if !d.Ranks[i].Flagged {
			continue
		}
		f := j.final[next]
		next++
		sg := shareGroup(i)
		if f.Kind == KindCompute && float64(j.shareCnt[sg])/float64(size(sg)) > o.MaxSlowShare && j.shareCnt[sg] >= 2 {
			d.Ranks[i].Flagged, d.Ranks[i].Kind = false, KindNone
			j.absorbed[i] = true
			continue
		}
		kept = append(kept, f)
	}
	j.final = kept
	return true, share
}

// recount sets the groups' flag counts from the final flags.
func recount(d *StepDecision, group []int32) {
	for g := range d.Groups {
		d.Groups[g].ComputeFlagged, d.Groups[g].LinkFlagged = 0, 0
	}
	for i := range d.Ranks {
		if !d.Ranks[i].Flagged || int(group[i]) >= len(d.Groups) {
			continue
		}
		if d.Ranks[i].Kind == KindLink {
			d.Groups[group[i]].LinkFlagged++
		} else {
			d.Groups[group[i]].ComputeFlagged++
		}
	}
}
