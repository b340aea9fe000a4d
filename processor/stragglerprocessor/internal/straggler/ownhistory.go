package straggler

import "time"

// peerCalm reports whether the level of sample i's peers did not move: the
// lower median of its group's own ratios stays under MinExcess. A group
// smaller than MinGroupSize is compared with the other groups instead,
// each normalised by its own level: that is the job's pace, 1 by
// construction, so its ranks are judged by their own ratios alone (two
// ranks of a small group slowing together while the job keeps its pace
// are two stragglers, not a new level).
// A rank is also judged against its own history: SelfExcess (50 %) over
// its own baseline while its group's level did not move. By chance a rank
// with per-step noise (sequence lengths, lognormal sigma 0.15) passes that
// about once in 200 steps, three times in five steps once in 10^5 windows:
// nothing in a group of ten, but about two ranks per run across 16,384. So
// in a group of more than selfHistoryGroup ranks the own-history test asks
// for twice the rank's level (selfExcessLargeGroup), which is no noise;
// there the peers are the better reference anyway.
const (
	selfHistoryGroup     = 64
	selfExcessLargeGroup = 1.0
)

// selfExcess is the excess over its own baseline that flags rank i.
func (j *Job) selfExcess(i int) float64 {
	if int(j.groupSize[j.group[i]]) <= selfHistoryGroup {
		return j.opts.SelfExcess
	}
	return max(j.opts.SelfExcess, selfExcessLargeGroup)
}

func (j *Job) peerCalm(i int, pace float64) bool {
	if pace <= 0 {
		return false
	}
	if int(j.groupSize[j.group[i]]) < j.opts.Detect.MinGroupSize {
		return true
	}
	p := j.peer[j.group[i]]
	return p < 0 || p < 1+j.opts.Detect.MinExcess
}

// selfFlag is the flag of a rank slow against its own history.
func (j *Job) selfFlag(s *RankSample, d *StepDecision, i int, own float64) *Flag {
	st := &d.Groups[j.group[i]]
	f := Flag{Rank: s.Rank, Group: s.Group, Kind: KindCompute, Link: s.Link, Score: d.Ranks[i].Score,
		Compute: time.Duration(nonNegative(s.Compute)), GroupMedianCompute: st.Median, ComputeRatio: own,
		Wait: time.Duration(nonNegative(s.CollectiveWait)), GroupMedianWait: st.MedianWait}
	f.WaitRatio = ratio(float64(f.Wait), float64(st.MedianWait))
	return &f
}

// flagOf returns rank's flag in flags (nil when none).
func flagOf(flags []Flag, rank int) *Flag {
	for k := range flags {
		if flags[k].Rank == rank {
			f := flags[k]
			return &f
		}
	}
	return nil
}

func anyHardwareTrouble(samples []RankSample) bool {
	for i := range samples {
		if samples[i].HardwareTrouble {
			return true
		}
	}
	return false
}
