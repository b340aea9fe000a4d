package straggler

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// Job defaults. The reasons are in the package documentation ("# A job").
const (
	DefaultMaxSlowShare = 1.0 / 3
	DefaultCloseExcess  = 0.10
	DefaultSelfExcess   = 0.5
	DefaultWarmup       = 5
	DefaultStageGap     = 0.15
	DefaultMaxRanks     = 32768

	// baselineWindow is how many of a rank's recent unflagged compute times
	// its own baseline (their median) is made of; Warmup may not exceed it.
	baselineWindow = 15
	// stageSpread: the inferred groups look like a pipeline's stages (or
	// tensor groups) when each one's stable ranks' levels deviate from
	// their median by at most this fraction (median absolute deviation):
	// a stage's ranks do the same work. The slow half of a half-slow job,
	// 3-4x spread rank by rank, deviates by 7%.
	stageSpread = 0.04
	// stageRange: ... and the middle 80% of their levels lie within this
	// fraction of their median: a stage of 256 ranks with 2-3% jitter
	// spans 5-8%, a group drawn evenly from 3-4x about 23%.
	stageRange = 0.12
	// stableSpread: a rank whose first Warmup compute times deviate from
	// their median by at most this fraction (median absolute deviation) has
	// a stable level, so a gap next to it may separate inferred groups.
	stableSpread = 0.10
	// ratioScale turns ratios into integers for the int64 selection.
	ratioScale = 1 << 20
	// inferredPrefix starts the names of inferred groups.
	inferredPrefix = "inferred-"
	// newcomerGroup holds ranks first seen after the groups were inferred,
	// until their own baseline places them.
	newcomerGroup = inferredPrefix + "new"
)

// JobOptions configures a Job. A zero field takes its default.
type JobOptions struct {
	// Detect is the per-step rule (DecideStep).
	Detect Options
	// Persistence opens and resolves rank verdicts.
	Persistence PersistenceOptions
	// MaxSlowShare: when more than this share of a group's ranks (and at
	// least two) are flagged for compute in one step, the step is a
	// job-level slowdown, not that many stragglers; their flags are taken
	// out of the rank decision. The share is taken over a labelled group of
	// at least MinGroupSize ranks, else over the job's ranks. Default 1/3.
	MaxSlowShare float64
	// CloseExcess: an open verdict resolves only after N decided steps in
	// which the rank was neither flagged nor above this excess (over its
	// group median and over its own baseline): the hysteresis that keeps
	// a borderline rank from opening and closing verdicts. Default 0.10,
	// well below MinExcess (0.25).
	CloseExcess float64
	// SelfExcess: a rank this much above its own baseline (normalised by
	// the job's pace) while its group's level did not move is flagged; in
	// a group too small for median and MAD (fewer than MinGroupSize ranks)
	// whatever its peers do. Default 0.5.
	SelfExcess float64
	// Warmup is the number of a rank's compute times before its baseline
	// exists, and the number of steps an unlabelled job is watched before
	// its groups are inferred (nothing is flagged meanwhile). Default 5,
	// at most 15.
	Warmup int
	// StageGap: neighbouring rank levels further apart than this fraction
	// (both stable) separate inferred groups. Default 0.15.
	StageGap float64
	// MaxRanks bounds the ranks with history ([0, MaxRanks)); others are
	// judged by DecideStep alone. Default 32768.
	MaxRanks int
}

// DefaultJobOptions returns the defaults spelled out.
func DefaultJobOptions() JobOptions {
	return JobOptions{
		Detect: DefaultOptions(), Persistence: PersistenceOptions{K: DefaultK, N: DefaultN},
		MaxSlowShare: DefaultMaxSlowShare, CloseExcess: DefaultCloseExcess, SelfExcess: DefaultSelfExcess,
		Warmup: DefaultWarmup, StageGap: DefaultStageGap, MaxRanks: DefaultMaxRanks,
	}
}

// Validate reports the fields that are set but unusable; zero fields are
// valid (they take their defaults). Messages name the configuration keys.
func (o JobOptions) Validate() error {
	var errs []error
	if err := o.Detect.Validate(); err != nil {
		errs = append(errs, err)
	}
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	if !finite(o.MaxSlowShare) || o.MaxSlowShare < 0 || o.MaxSlowShare >= 1 {
		errs = append(errs, fmt.Errorf("max_slow_share: %v must be in [0, 1) (0: the default 1/3)", o.MaxSlowShare))
	}
	minExcess := o.Detect.withDefaults().MinExcess
	if !finite(o.CloseExcess) || o.CloseExcess < 0 || o.CloseExcess >= minExcess {
		errs = append(errs, fmt.Errorf("close_excess: %v must be in [0, min_excess %v) (0: the default 0.10)", o.CloseExcess, minExcess))
	}
	if !finite(o.SelfExcess) || o.SelfExcess < 0 {
		errs = append(errs, fmt.Errorf("self_excess: %v must be a finite number >= 0", o.SelfExcess))
	}
	if o.Warmup < 0 || o.Warmup > baselineWindow {
		errs = append(errs, fmt.Errorf("warmup_steps: %d must be in [0, %d]", o.Warmup, baselineWindow))
	}
	if !finite(o.StageGap) || o.StageGap < 0 {
		errs = append(errs, fmt.Errorf("stage_gap: %v must be a finite number >= 0", o.StageGap))
	}
	if o.MaxRanks < 0 {
		errs = append(errs, fmt.Errorf("max_ranks: %d must be >= 0", o.MaxRanks))
	}
	return errors.Join(errs...)
}

func (o JobOptions) withDefaults() JobOptions {
	o.Detect = o.Detect.withDefaults()
	usable := func(v float64) bool { return v > 0 && !math.IsInf(v, 0) } // NaN fails v > 0
	if !usable(o.MaxSlowShare) || o.MaxSlowShare >= 1 {
		o.MaxSlowShare = DefaultMaxSlowShare
	}
	if !usable(o.CloseExcess) || o.CloseExcess >= o.Detect.MinExcess {
		o.CloseExcess = min(DefaultCloseExcess, o.Detect.MinExcess/2)
	}
	if !usable(o.SelfExcess) {
		o.SelfExcess = DefaultSelfExcess
	}
	if o.Warmup <= 0 || o.Warmup > baselineWindow {
		o.Warmup = DefaultWarmup
	}
	if !usable(o.StageGap) {
		o.StageGap = DefaultStageGap
	}
	if o.MaxRanks <= 0 {
		o.MaxRanks = DefaultMaxRanks
	}
	return o
}

// JobVerdict is a job-level slowdown: more than MaxSlowShare of a group
// slow at once in K of N decided steps (a bimodal or uniformly slowed job,
// not that many stragglers).
type JobVerdict struct {
	OnsetStep, OpenedStep int64
	// OnsetUnixNano is the onset step's start in data time (0: unknown).
	OnsetUnixNano int64
	// ResolvedStep is the newest decided step when it resolved; 0 while open.
	ResolvedStep int64
	// PeakShare is the largest slow share seen while open.
	PeakShare float64
}

// jobStep is one decided step in the job-level window.
type jobStep struct {
	step     int64
	start    int64
	share    float64
	exceeded bool // more than MaxSlowShare slow
	warm     bool // at least half of MaxSlowShare slow: keeps an open verdict open
}

// JobDecision is a Job's answer for one step. Its slices belong to the Job
// and are valid until the next Decide.
type JobDecision struct {
	// StepDecision is DecideStep's answer after the job's rules: Flags (in
	// sample order) and Ranks[i].Flagged say who is slow this step.
	StepDecision
	// Transitions are the rank verdicts that opened or resolved.
	Transitions []Transition
	// SlowShare is the largest share of a group flagged for compute at once
	// (counting only steps with two or more such ranks; 0 otherwise).
	SlowShare float64
	// ShareExceeded: more than MaxSlowShare of a group was slow at once,
	// so those ranks' flags were taken out of Flags.
	ShareExceeded bool
	// JobVerdict is the open job-level verdict after this step (nil: none),
	// JobTransition whether it opened or resolved on this step (0: neither;
	// on VerdictResolved, JobVerdict is the resolved verdict).
	JobVerdict    *JobVerdict
	JobTransition TransitionState
	// Inferred: no sample carried a group, so groups were inferred.
	// Warming: not enough steps yet to infer them; nothing was flagged.
	Inferred, Warming bool
}

// Job decides one job's steps: DecideStep within its groups (labelled, or
// inferred from the data when no rank carries one), each rank compared
// also with its own history, the slow share of a group capped, and
// Persistence with hysteresis on top. It holds one job's state, is not
// safe for concurrent use and never panics or returns a NaN. Its memory:
// 68 bytes per rank in [0, MaxRanks) seen, plus Persistence's bound.
type Job struct {
	opts   JobOptions
	p      *Persistence
	steps  int // steps decided
	ranks  []rankHistory
	levels []float64 // inferred groups' levels (nil until inferred)
	names  []string  // inferred groups' names
	// stageLike: the inferred groups look like stages (inferGroups); if
	// not, an unlabelled rank no slower than the job's median is no
	// straggler.
	stageLike bool
	window    []jobStep // job-level window, ascending, at most N
	verdict   *JobVerdict
	// resolvedVerdict is the job verdict that resolved on the last step.
	resolvedVerdict *JobVerdict

	// Per-step scratch, reused.
	work      []RankSample
	hist      []int32   // sample -> rank history index, -1: none
	own       []float64 // sample -> compute over own baseline after the pace, -1: unknown
	raw       []float64 // sample -> compute over own baseline, -1: unknown
	group     []int32   // sample -> group index
	final     []Flag
	hot       []int
	scaled    []int64
	groupIdx  map[string]int32
	groupSize []int
	peer      []float64 // group -> lower median of own ratios
	shareCnt  []int
	absorbed  []bool
	jobWork   []RankSample
	starts    []int32
	order     []int32
	fill      []int32
	// judgeSingles: this step, a rank alone on its inferred level is
	// judged against the job (singlesJudgedByJob): against singleRef, the
	// slowest stage's median, by singleScale, the typical relative spread
	// within the groups.
	judgeSingles           bool
	singleRef, singleScale float64
}

// NewJob returns the empty state of one job.
func NewJob(opts JobOptions) *Job {
	o := opts.withDefaults()
	return &Job{opts: o, p: NewPersistence(o.Persistence), groupIdx: map[string]int32{}}
}

// Open returns the open rank verdicts sorted by rank.
func (j *Job) Open() []Verdict { return j.p.Open() }

// Stats returns what the job's Persistence refused so far.
func (j *Job) Stats() PersistenceStats { return j.p.Stats() }

// Decide decides one step of the job: samples are its ranks' reports,
// startUnixNano the step's start in data time (0: unknown).
func (j *Job) Decide(step int64, samples []RankSample, startUnixNano int64) JobDecision {
	o := j.opts
	n := len(samples)
	labelled := false
	for i := range samples {
		if samples[i].Group != "" {
			labelled = true
			break
		}
	}
	j.steps++
	inferred := !labelled
	if inferred && j.levels == nil && j.steps > o.Warmup {
		j.inferGroups()
	}
	warming := inferred && j.levels == nil

	// Each rank's compute over its own baseline (raw), and over that the
	// job's pace (own): the median of the other ranks' raw ratios (a
	// checkpoint slows every rank alike; leaving the rank out keeps one slow
	// rank of a tiny job from setting the pace it is judged by: issue 30).
	j.hist = resize(j.hist, n)
	j.own = resize(j.own, n)
	j.raw = resize(j.raw, n)
	j.scaled = j.scaled[:0]
	for i := range samples {
		j.hist[i] = j.historyOf(samples[i].Rank)
		j.own[i], j.raw[i] = -1, -1
		if h := j.historyAt(j.hist[i]); h != nil && int(h.n) >= o.Warmup {
			if b := h.baseline(); b > 0 {
				j.raw[i] = float64(nonNegative(samples[i].Compute)) / b
				j.scaled = append(j.scaled, saturate(j.raw[i]*ratioScale))
			}
		}
	}
	pace := j.normalise()

	work := samples
	if inferred && !warming {
		j.work = resize(j.work, n)
		copy(j.work, samples)
		for i := range j.work {
			j.work[i].Group = j.inferredName(j.hist[i])
		}
		work = j.work
	}
	d := DecideStep(work, o.Detect)
	d.StartUnixNano = startUnixNano
	j.indexGroups(work)
	j.judgeSingles = inferred && !warming && j.singlesJudgedByJob(&d)

	// A rank with hardware trouble is judged against the whole job too:
	// its level may be its own inferred group's.
	var jobWide StepDecision
	if inferred && !warming && anyHardwareTrouble(samples) {
		j.jobWork = resize(j.jobWork, n)
		copy(j.jobWork, samples)
		for i := range j.jobWork {
			j.jobWork[i].Group = ""
		}
		jobWide = DecideStep(j.jobWork, o.Detect)
	}

	j.final = j.final[:0]
	next := 0 // d.Flags is in sample order
	for i := range work {
		res := &d.Ranks[i]
		var f *Flag
		if res.Flagged {
			f = &d.Flags[next]
			next++
		}
		own, hw := j.own[i], samples[i].HardwareTrouble
		switch {
		case warming:
			f = nil
		case f != nil && f.Kind == KindCompute && inferred && !hw && own < 1+j.noiseExcess(i, o.Detect.MinExcess):
			// Slow against its inferred group but not against its own
			// level since the job's first steps (or not beyond its own
			// noise): a stage, not a fault.
			f = nil
		case f == nil && hw && jobWide.Ranks != nil && jobWide.Ranks[i].Flagged && jobWide.Ranks[i].Kind == KindCompute:
			f = flagOf(jobWide.Flags, samples[i].Rank)
		}
		if f == nil && !warming {
			// A rank alone on its level is judged against the job, the
			// slower of a pair against its peer.
			f = j.smallGroupFlag(work, &d, i)
		}
		if f == nil && !warming && own >= 1+j.selfExcess(i) && j.peerCalm(i, pace) && j.slowerThanGroup(&d, i, samples[i].Compute) &&
			own >= 1+j.noiseExcess(i, j.selfExcess(i)) {
			f = j.selfFlag(&work[i], &d, i, own)
		}
		if f != nil && f.Kind == KindCompute && inferred && !hw && !j.stageLike && nonNegative(samples[i].Compute) <= int64(d.Summary.Median) {
			// Inferred groups that do not look like stages (unequal sizes,
			// spread levels: a heterogeneous job) are a guess: a rank no
			// slower than the job's median holds no one up (issue 30: the
			// fast half of a half-slow job spiking over its own level).
			f = nil
		}
		res.Flagged, res.Kind = f != nil, KindNone
		if f != nil {
			res.Kind = f.Kind
			j.final = append(j.final, *f)
		}
	}

	shareExceeded, share := j.capShare(&d, labelled)
	d.Flags = j.final
	recount(&d, j.group)

	// Hysteresis: the open verdicts' ranks still above the close margin.
	j.hot = j.hot[:0]
	if len(j.p.open) > 0 {
		for i := range samples {
			r := samples[i].Rank
			if d.Ranks[i].Flagged || !j.p.IsOpen(r) {
				continue
			}
			if j.stillHot(&d, i, samples[i].Compute, inferred) {
				j.hot = append(j.hot, r)
			}
		}
	}
	d.Hot = j.hot

	stampOwnStarts(d.Flags, samples)
	out := JobDecision{StepDecision: d, Inferred: inferred, Warming: warming, SlowShare: share, ShareExceeded: shareExceeded}
	out.Transitions = j.p.Observe(step, d)
	out.JobTransition = j.observeJob(jobStep{step: step, start: startUnixNano, share: share, exceeded: shareExceeded,
		warm: share >= o.MaxSlowShare/2})
	out.JobVerdict = j.verdict
	if out.JobTransition == VerdictResolved {
		out.JobVerdict = j.resolvedVerdict
	}

	// Remember the unflagged, unabsorbed times: the ranks' baselines.
	for i := range samples {
		h := j.historyAt(j.hist[i])
		if h == nil || d.Ranks[i].Flagged || j.absorbed[i] || slices.Contains(j.hot, samples[i].Rank) {
			continue
		}
		h.push(nonNegative(samples[i].Compute))
	}
	return out
}

// resize returns s with length n, reusing its array when it is big enough.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// historyOf returns the index of rank's history, creating it; -1 for a
// rank outside [0, MaxRanks).
func (j *Job) historyOf(rank int) int32 {
	if rank < 0 || rank >= j.opts.MaxRanks {
		return -1
	}
	if rank >= len(j.ranks) {
		// Ranks mostly arrive in ascending order: grow the array
		// geometrically and reslice within its capacity, not a new array
		// (and a copy of every rank so far) per new rank.
		n := len(j.ranks)
		if rank >= cap(j.ranks) {
			grown := make([]rankHistory, n, max(rank+1, min(2*cap(j.ranks), j.opts.MaxRanks)))
			copy(grown, j.ranks)
			j.ranks = grown
		}
		j.ranks = j.ranks[:rank+1]
		for k := n; k <= rank; k++ {
			j.ranks[k] = rankHistory{group: -1}
		}
	}
	j.ranks[rank].seen = true
	return int32(rank)
}

func (j *Job) historyAt(i int32) *rankHistory {
	if i < 0 {
		return nil
	}
	return &j.ranks[i]
}

// indexGroups numbers the samples' groups in order of first appearance (as
// DecideStep does, so the numbers index StepDecision.Groups) and computes
// each group's size and the lower median of its members' own ratios: the
// level of a rank's peers (the lower median ignores the rank itself when
// it is the slow one of two).
func (j *Job) indexGroups(work []RankSample) {
	clear(j.groupIdx)
	j.group = resize(j.group, len(work))
	j.groupSize = j.groupSize[:0]
	for i := range work {
		g, ok := j.groupIdx[work[i].Group]
		if !ok {
			g = int32(len(j.groupSize))
			j.groupIdx[work[i].Group] = g
			j.groupSize = append(j.groupSize, 0)
		}
		j.group[i] = g
		j.groupSize[g]++
	}
	// Lay the samples out group by group (a counting sort) so each group's
	// ratios are collected in one pass.
	groups := len(j.groupSize)
	j.starts = resize(j.starts, groups+1)
	j.starts[0] = 0
	for g, c := range j.groupSize {
		j.starts[g+1] = j.starts[g] + int32(c)
	}
	j.order = resize(j.order, len(work))
	j.fill = append(j.fill[:0], j.starts[:groups]...)
	for i, g := range j.group {
		j.order[j.fill[g]] = int32(i)
		j.fill[g]++
	}
	j.peer = resize(j.peer, groups)
	for g := range j.peer {
		j.scaled = j.scaled[:0]
		for _, i := range j.order[j.starts[g]:j.starts[g+1]] {
			if j.own[i] >= 0 {
				j.scaled = append(j.scaled, saturate(j.own[i]*ratioScale))
			}
		}
		j.peer[g] = -1
		if len(j.scaled) >= 2 {
			j.peer[g] = float64(selectKth(j.scaled, (len(j.scaled)-1)/2)) / ratioScale
		}
	}
}

// stillHot reports whether sample i, unflagged with an open verdict, still
// runs above the close margin: over its group's median where the group
// can flag (and, where the groups were inferred, over its own baseline
// too: that is what flagged it), over its own baseline where the group
// cannot flag.
func (j *Job) stillHot(d *StepDecision, i int, compute time.Duration, inferred bool) bool {
	limit := 1 + j.opts.CloseExcess
	st := &d.Groups[j.group[i]]
	ownHot := j.own[i] >= limit
	if !st.CouldFlag {
		return ownHot // no own baseline: nothing holds the verdict open
	}
	groupHot := ratio(float64(nonNegative(compute)), float64(st.Median)) >= limit
	if inferred {
		return groupHot && (ownHot || j.own[i] < 0)
	}
	return groupHot
}

// observeJob adds a decided step to the job-level window and opens the job
// verdict when K of the last N steps exceeded the share, or resolves it
// after N steps of which none had even half the share slow. Steps arrive
// out of order like Persistence's; repeated and stale ones are ignored.
func (j *Job) observeJob(s jobStep) TransitionState {
	k, n := j.p.opts.K, j.p.opts.N
	pos, found := slices.BinarySearchFunc(j.window, s.step, func(w jobStep, t int64) int { return cmp.Compare(w.step, t) })
	if found || (len(j.window) == n && pos == 0) {
		return 0
	}
	j.window = slices.Insert(j.window, pos, s)
	if len(j.window) > n {
		j.window = slices.Delete(j.window, 0, 1)
	}
	newest := j.window[len(j.window)-1].step
	exceeded, warm := 0, 0
	for _, w := range j.window {
		if w.exceeded {
			exceeded++
		}
		if w.warm || w.exceeded {
			warm++
		}
	}
	if j.verdict == nil {
		if exceeded < k {
			return 0
		}
		v := &JobVerdict{OpenedStep: newest}
		first := true
		for _, w := range j.window {
			if !w.exceeded {
				continue
			}
			if first {
				v.OnsetStep, v.OnsetUnixNano, first = w.step, w.start, false
			}
			v.PeakShare = max(v.PeakShare, w.share)
		}
		j.verdict = v
		return VerdictOpened
	}
	if s.exceeded {
		j.verdict.PeakShare = max(j.verdict.PeakShare, s.share)
	}
	if len(j.window) == n && warm == 0 {
		v := j.verdict
		v.ResolvedStep = newest
		j.resolvedVerdict, j.verdict = v, nil
		return VerdictResolved
	}
	return 0
}
