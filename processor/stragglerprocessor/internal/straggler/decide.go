package straggler

import (
	"math"
	"time"
)

// madToSigma is Φ⁻¹(0.75): 0.6745·(x−median)/MAD is the modified z-score of
// Iglewicz and Hoaglin, comparable to a standard z-score for normal data.
const madToSigma = 0.6745

// RankSample is one rank's report for one step.
type RankSample struct {
	// Rank is the rank's global index (training.rank).
	Rank int
	// Group is the pipeline stage (training.pp_stage) or any other label of
	// ranks that are expected to take the same time; ranks are compared only
	// within their group. Empty is a group like any other.
	Group string
	// Compute is the rank's own compute time for the step: the sum of its
	// phase durations, or the step time minus the time blocked in collectives.
	// Negative values are treated as zero.
	Compute time.Duration
	// CollectiveWait is the time the rank spent in collectives during the
	// step (optional; zero for every rank switches the slow-link test off).
	// A compute straggler waits least (its peers wait for it); the members of
	// a communicator behind a slow link wait longest while computing normally.
	CollectiveWait time.Duration
	// NoWait says the rank's CollectiveWait cannot be compared with its
	// peers' this step (it was measured another way): it is left out of
	// the wait statistics and is never a link straggler. A group where
	// fewer than half the ranks have a comparable wait judges no link.
	NoWait bool
	// StartUnixNano is the rank's own start of the step on its node's
	// clock (data time, Unix ns; 0: unknown). Job.Decide copies it into
	// the rank's Flag, so that a verdict's onset is the straggler's own
	// step, not the earliest clock of the job.
	StartUnixNano int64
	// Link identifies the communicator the rank's collectives ran on
	// (optional), so a slow link can be told from peers of a straggler.
	Link string
	// HardwareTrouble says the rank's step span reported GPU trouble (XIDs,
	// throttling, ECC double-bit errors, NVLink CRC errors). DecideStep
	// ignores it; a Job lets it override the rule that a rank whose level
	// has been stable since the job's first steps is not a straggler.
	HardwareTrouble bool
}

// Kind says why a rank was flagged.
type Kind uint8

const (
	// KindNone: not flagged.
	KindNone Kind = iota
	// KindCompute: the rank computes slower than its group (a slow GPU, host
	// or input pipeline on that rank).
	KindCompute
	// KindLink: the rank computes normally but its collectives take longer
	// than its group's (a slow link or NIC on its communicator).
	KindLink
)

// String returns "", "compute" or "link": the suffix of the fault types
// straggler.compute and straggler.link.
func (k Kind) String() string {
	switch k {
	case KindCompute:
		return "compute"
	case KindLink:
		return "link"
	default:
		return ""
	}
}

// RankResult is the decision for one rank, at the same index as its sample.
type RankResult struct {
	Rank int
	// Score is the rank's compute modified z-score within its group
	// (straggler.score): 0 at the median, about 1 per robust standard
	// deviation above it, negative when faster. Always finite.
	Score   float64
	Flagged bool
	Kind    Kind
}

// Flag is the evidence for one flagged rank.
type Flag struct {
	Rank  int
	Group string
	Kind  Kind
	Link  string
	// Score is the modified z-score of the signal that flagged the rank:
	// compute for KindCompute, collective wait for KindLink.
	Score float64
	// Compute and the group's median compute; ComputeRatio = Compute/median
	// (0 when the median is 0).
	Compute, GroupMedianCompute time.Duration
	ComputeRatio                float64
	// Wait and the group's median collective wait; WaitRatio = Wait/median
	// (0 when there is no wait signal). For a compute straggler a ratio
	// below 1 is the "waits least" corroboration.
	Wait, GroupMedianWait time.Duration
	WaitRatio             float64
	// LinkPeersFlagged counts the other ranks on the same Link flagged as
	// KindLink in this step (a link fault usually shows on several).
	LinkPeersFlagged int
	// StartUnixNano is the rank's own start of the step
	// (RankSample.StartUnixNano, filled by Job.Decide; 0: unknown):
	// Persistence reports the onset step's as Verdict.OnsetUnixNano.
	StartUnixNano int64
}

// GroupStats summarises one group's compute times.
type GroupStats struct {
	Group                       string
	Ranks                       int
	Mean, Median                time.Duration
	MAD                         time.Duration
	MedianWait                  time.Duration
	MeanWait                    time.Duration
	CouldFlag                   bool // false when the group is too small or its median is zero
	ComputeFlagged, LinkFlagged int  // ranks flagged as compute and as link
}

// StepSummary describes the step's compute times over all ranks reported:
// the attributes of the step's root span.
type StepSummary struct {
	RanksReported int
	Mean, Median  time.Duration
	P99, Max      time.Duration
	// SlowestRank has the longest compute (the first such rank on ties);
	// -1 when no rank reported.
	SlowestRank int
}

// StepDecision is DecideStep's answer for one step.
type StepDecision struct {
	// Ranks holds one result per sample, in the order of the samples.
	Ranks []RankResult
	// Flags holds the evidence for each flagged rank, in sample order.
	Flags   []Flag
	Groups  []GroupStats
	Summary StepSummary
	// Hot lists, sorted, the ranks that were not flagged but still ran
	// above the close margin this step (Job fills it for the ranks with an
	// open verdict): Persistence resolves a verdict only after N decided
	// steps without a flag or a hot step for its rank. DecideStep leaves it
	// empty.
	Hot []int
	// StartUnixNano is the step's start in data time (the earliest rank
	// start), 0 when unknown: Persistence reports the onset step's as
	// Verdict.OnsetUnixNano.
	StartUnixNano int64
}

// DecideStep scores every rank of one step against its group and flags the
// stragglers. It never panics and never returns a NaN or infinite score, on
// any input. Unset or unusable options take their defaults (see Options).
// It allocates about 40 bytes per rank and keeps no state.
func DecideStep(samples []RankSample, opts Options) StepDecision {
	o := opts.withDefaults()
	n := len(samples)
	d := StepDecision{Ranks: make([]RankResult, n), Summary: StepSummary{SlowestRank: -1}}
	if n == 0 {
		return d
	}

	// Index the groups in order of first appearance and lay the sample
	// indices out group by group (a counting sort), so each group's values
	// are contiguous in one scratch slice.
	groupOf := make([]int32, n)
	groupIndex := make(map[string]int32, 4)
	var groupNames []string
	var counts []int32
	hasWait := false
	for i := range samples {
		s := &samples[i]
		g, ok := groupIndex[s.Group]
		if !ok {
			g = int32(len(groupNames))
			groupIndex[s.Group] = g
			groupNames = append(groupNames, s.Group)
			counts = append(counts, 0)
		}
		groupOf[i] = g
		counts[g]++
		if s.CollectiveWait > 0 && !s.NoWait {
			hasWait = true
		}
		d.Ranks[i].Rank = s.Rank
	}
	starts := make([]int32, len(counts)+1)
	for g, c := range counts {
		starts[g+1] = starts[g] + c
	}
	order := make([]int32, n)
	fill := append([]int32(nil), starts[:len(counts)]...)
	for i, g := range groupOf {
		order[fill[g]] = int32(i)
		fill[g]++
	}

	scratch := make([]int64, n)
	d.Groups = make([]GroupStats, len(groupNames))
	var groupMedWait []float64
	if hasWait {
		groupMedWait = make([]float64, len(groupNames))
	}
	for g, name := range groupNames {
		members := order[starts[g]:starts[g+1]]
		st := scoreGroup(samples, members, scratch[:len(members)], o, d.Ranks)
		st.Group = name
		if hasWait {
			groupMedWait[g] = waitStats(samples, members, scratch[:len(members)], &st)
		}
		d.Groups[g] = st
	}

	var waitScale []float64
	if hasWait {
		waitScale = flagLinks(samples, groupOf, order, starts, d.Groups, groupMedWait, scratch, o, d.Ranks)
	}
	d.Flags = collectFlags(samples, groupOf, d.Groups, groupMedWait, waitScale, d.Ranks)
	for i := range d.Flags {
		if d.Flags[i].Kind == KindCompute {
			d.Groups[groupIndex[d.Flags[i].Group]].ComputeFlagged++
		} else {
			d.Groups[groupIndex[d.Flags[i].Group]].LinkFlagged++
		}
	}
	d.Summary = summarize(samples, scratch)
	return d
}

// nonNegative is the duration DecideStep works with: a negative report is
// a clock or accounting error, and counts as zero.
func nonNegative(v time.Duration) int64 { return max(int64(v), 0) }

// robustScale is the denominator of the modified z-score: the MAD, but never
// below MADFloor of the reference and never below 1 ns, so it is positive.
func robustScale(mad, reference float64, o Options) float64 {
	return max(mad, o.MADFloor*reference, 1)
}

// ruleHits applies the configured rule to a value x of a group with the
// given median, mean and robust scale (all in nanoseconds).
func ruleHits(x, med, mean, scale float64, o Options) bool {
	robust := madToSigma*(x-med)/scale >= o.ZThreshold
	meanFactor := x > o.Factor*mean
	switch o.Rule {
	case RuleMeanFactor:
		return meanFactor
	case RuleBoth:
		return robust && meanFactor
	default:
		return robust
	}
}

// scoreGroup computes the group's compute statistics, writes every
// member's score and flags the compute stragglers in results.
func scoreGroup(samples []RankSample, members []int32, buf []int64, o Options, results []RankResult) GroupStats {
	var sum float64
	for j, i := range members {
		buf[j] = nonNegative(samples[i].Compute)
		sum += float64(buf[j])
	}
	mean := sum / float64(len(members))
	med := median(buf)
	for j := range buf {
		buf[j] = saturate(math.Abs(float64(buf[j]) - med))
	}
	mad := median(buf)
	scale := robustScale(mad, med, o)

	st := GroupStats{
		Ranks:     len(members),
		Mean:      durationOf(mean),
		Median:    durationOf(med),
		MAD:       durationOf(mad),
		CouldFlag: len(members) >= o.MinGroupSize && med > 0,
	}
	for _, i := range members {
		x := float64(nonNegative(samples[i].Compute))
		r := &results[i]
		r.Score = madToSigma * (x - med) / scale
		if st.CouldFlag && x-med >= o.MinExcess*med && ruleHits(x, med, mean, scale, o) {
			r.Flagged, r.Kind = true, KindCompute
		}
	}
	return st
}

// waitStats records the group's collective-wait median and mean in st and
// returns the median in nanoseconds.
func waitStats(samples []RankSample, members []int32, buf []int64, st *GroupStats) float64 {
	var sum float64
	known := buf[:0]
	for _, i := range members {
		if samples[i].NoWait {
			continue
		}
		known = append(known, nonNegative(samples[i].CollectiveWait))
		sum += float64(known[len(known)-1])
	}
	if len(known) == 0 {
		return 0
	}
	med := median(known)
	st.MedianWait = durationOf(med)
	st.MeanWait = durationOf(sum / float64(len(known)))
	return med
}

// comparableWaits reports whether at least half of the members have a
// wait that can be compared (not NoWait).
func comparableWaits(samples []RankSample, members []int32) bool {
	known := 0
	for _, i := range members {
		if !samples[i].NoWait {
			known++
		}
	}
	return known > 0 && 2*known >= len(members)
}

// flagLinks flags the ranks that compute normally but wait in collectives
// far longer than their group: the slow-link signature. A rank whose wait
// is explained by a compute straggler on the same communicator (or, without
// communicator ids, in the same group) is left alone: it was waiting for
// that straggler, not for the network. It returns each group's robust
// scale of the waits (0 where the group could not flag).
func flagLinks(samples []RankSample, groupOf, order, starts []int32, groups []GroupStats, groupMedWait []float64,
	buf []int64, o Options, results []RankResult) []float64 {
	waitScale := make([]float64, len(groups))
	var stragglerLinks map[string]bool
	groupHasStraggler := make([]bool, len(groups))
	for i := range results {
		if results[i].Kind != KindCompute {
			continue
		}
		groupHasStraggler[groupOf[i]] = true
		if l := samples[i].Link; l != "" {
			if stragglerLinks == nil {
				stragglerLinks = make(map[string]bool)
			}
			stragglerLinks[l] = true
		}
	}
	for g := range groups {
		st := &groups[g]
		medC, medW := float64(st.Median), groupMedWait[g]
		// The reference is the typical rank's compute plus wait: a link fault
		// must cost MinExcess of a step, not of a (possibly tiny) wait.
		reference := medC + medW
		members := order[starts[g]:starts[g+1]]
		if !st.CouldFlag || reference <= 0 || !comparableWaits(samples, members) {
			continue
		}
		dev := buf[:0]
		for _, i := range members {
			if !samples[i].NoWait {
				dev = append(dev, saturate(math.Abs(float64(nonNegative(samples[i].CollectiveWait))-medW)))
			}
		}
		scale := robustScale(median(dev), reference, o)
		waitScale[g] = scale
		meanW := float64(st.MeanWait)
		for _, i := range members {
			r := &results[i]
			if r.Flagged {
				continue
			}
			s := &samples[i]
			if s.NoWait || explainedByStraggler(s.Link, groupHasStraggler[g], stragglerLinks) {
				continue
			}
			w := float64(nonNegative(s.CollectiveWait))
			if w-medW >= o.MinExcess*reference && ruleHits(w, medW, meanW, scale, o) {
				r.Flagged, r.Kind = true, KindLink
			}
		}
	}
	return waitScale
}

// explainedByStraggler reports whether a long wait on link can be blamed on
// a compute straggler this step.
func explainedByStraggler(link string, groupHasStraggler bool, stragglerLinks map[string]bool) bool {
	if link == "" {
		return groupHasStraggler
	}
	return stragglerLinks[link]
}

// collectFlags builds the evidence for every flagged rank.
func collectFlags(samples []RankSample, groupOf []int32, groups []GroupStats, groupMedWait, waitScale []float64, results []RankResult) []Flag {
	var flags []Flag
	linkFlagged := map[string]int(nil)
	for i := range results {
		if !results[i].Flagged {
			continue
		}
		s := &samples[i]
		st := &groups[groupOf[i]]
		f := Flag{
			Rank: s.Rank, Group: s.Group, Kind: results[i].Kind, Link: s.Link,
			Compute: time.Duration(nonNegative(s.Compute)), GroupMedianCompute: st.Median,
			Wait: time.Duration(nonNegative(s.CollectiveWait)), GroupMedianWait: st.MedianWait,
		}
		f.ComputeRatio = ratio(float64(f.Compute), float64(st.Median))
		if groupMedWait != nil {
			f.WaitRatio = ratio(float64(f.Wait), groupMedWait[groupOf[i]])
		}
		f.Score = results[i].Score
		if f.Kind == KindLink {
			g := groupOf[i]
			f.Score = madToSigma * (float64(f.Wait) - groupMedWait[g]) / waitScale[g]
			if s.Link != "" {
				if linkFlagged == nil {
					linkFlagged = make(map[string]int)
				}
				linkFlagged[s.Link]++
			}
		}
		flags = append(flags, f)
	}
	for j := range flags {
		if flags[j].Kind == KindLink && flags[j].Link != "" {
			flags[j].LinkPeersFlagged = linkFlagged[flags[j].Link] - 1
		}
	}
	return flags
}

// summarize computes the all-rank summary of compute times, using buf as
// scratch.
func summarize(samples []RankSample, buf []int64) StepSummary {
	s := StepSummary{RanksReported: len(samples), SlowestRank: -1}
	var sum float64
	slowest := int64(-1)
	for i := range samples {
		x := nonNegative(samples[i].Compute)
		buf[i] = x
		sum += float64(x)
		if x > slowest {
			slowest, s.SlowestRank = x, samples[i].Rank
		}
	}
	s.Mean = durationOf(sum / float64(len(samples)))
	s.Max = time.Duration(slowest)
	s.Median = durationOf(median(buf))
	s.P99 = time.Duration(nearestRank(buf, 0.99))
	return s
}

func ratio(x, ref float64) float64 {
	if ref <= 0 {
		return 0
	}
	return x / ref
}

// saturate converts a non-negative float64 count of nanoseconds to int64,
// clamping at MaxInt64 (float64(MaxInt64) itself rounds up past it).
func saturate(ns float64) int64 {
	if ns >= math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(ns)
}

// durationOf converts nanoseconds held in a float64 to a Duration, rounding
// and saturating instead of overflowing.
func durationOf(ns float64) time.Duration {
	return time.Duration(saturate(math.Round(ns)))
}
