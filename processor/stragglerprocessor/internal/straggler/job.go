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
	opts    JobOptions
	p       *Persistence
	steps   int // steps decided
	ranks   []rankHistory
	levels  []float64 // inferred groups' levels (nil until inferred)
	names   []string  // inferred groups' names
	window  []jobStep // job-level window, ascending, at most N
	verdict *JobVerdict
	// resolvedVerdict is the job verdict that resolved on the last step.
	resolvedVerdict *JobVerdict

	// Per-step scratch, reused.
	work      []RankSample
	hist      []int32   // sample -> rank history index, -1: none
	own       []float64 // sample -> compute over own baseline, -1: unknown
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

	// Each rank's compute over its own baseline, and the job's pace: the
	// median of those ratios (a checkpoint slows every rank alike).
	j.hist = resize(j.hist, n)
	j.own = resize(j.own, n)
	j.scaled = j.scaled[:0]
	for i := range samples {
		j.hist[i] = j.historyOf(samples[i].Rank)
		j.own[i] = -1
		if h := j.historyAt(j.hist[i]); h != nil && int(h.n) >= o.Warmup {
			if b := h.baseline(); b > 0 {
				j.own[i] = float64(nonNegative(samples[i].Compute)) / b
				j.scaled = append(j.scaled, saturate(j.own[i]*ratioScale))
			}
		}
	}
	pace := median(j.scaled) / ratioScale
	for i := range j.own {
		if j.own[i] >= 0 {
			if pace > 0 {
				j.own[i] /= pace
			} else {
				j.own[i] = -1
			}
		}
	}

	work := samples
	if inferred && !warming {
		j.work = resize(j.work, n)
		copy(j.work, samples)
		for i := range j.work {
			j.work[i].Group = j.inferredName(j.hist[i], j.own[i], samples[i].Compute, pace)
		}
		work = j.work
	}
	d := DecideStep(work, o.Detect)
	d.StartUnixNano = startUnixNano
	j.indexGroups(work)

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
		case f != nil && f.Kind == KindCompute && inferred && !hw && own < 1+o.Detect.MinExcess:
			// Slow against its inferred group but not against its own
			// level since the job's first steps: a stage, not a fault.
			f = nil
		case f == nil && hw && jobWide.Ranks != nil && jobWide.Ranks[i].Flagged && jobWide.Ranks[i].Kind == KindCompute:
			f = flagOf(jobWide.Flags, samples[i].Rank)
		}
		if f == nil && !warming && own >= 1+j.selfExcess(i) && j.peerCalm(i, pace) {
			f = j.selfFlag(&work[i], &d, i, own)
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
