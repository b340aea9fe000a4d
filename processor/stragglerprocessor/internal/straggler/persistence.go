package straggler

import (
	"cmp"
	"math"
	"slices"
)

// Persistence defaults. The reasons are in the package documentation.
const (
	DefaultK               = 3
	DefaultN               = 5
	DefaultMaxTrackedRanks = 1024
	DefaultMaxFlagsPerStep = 256
)

// PersistenceOptions configures a job's Persistence. Zero fields take their
// defaults.
type PersistenceOptions struct {
	// K of the last N decided steps must flag a rank to open a verdict
	// (default 3 of 5). An open verdict resolves once the rank went
	// unflagged in N consecutive decided steps: the whole window is clean.
	K, N int
	// MaxTrackedRanks bounds the open verdicts of a job (default 1024);
	// verdicts beyond it are counted in Stats.DroppedVerdicts, not opened.
	MaxTrackedRanks int
	// MaxFlagsPerStep bounds the flags remembered per step (default 256);
	// a step flagging more keeps its highest scores and counts the rest in
	// Stats.DroppedFlags. So the window holds at most N·MaxFlagsPerStep
	// flags whatever the job's size.
	MaxFlagsPerStep int
}

func (o PersistenceOptions) withDefaults() PersistenceOptions {
	if o.N <= 0 {
		o.N = DefaultN
	}
	if o.K <= 0 {
		o.K = min(DefaultK, o.N)
	}
	o.K = min(o.K, o.N) // a verdict that needs more flags than the window holds could never open
	if o.MaxTrackedRanks <= 0 {
		o.MaxTrackedRanks = DefaultMaxTrackedRanks
	}
	if o.MaxFlagsPerStep <= 0 {
		o.MaxFlagsPerStep = DefaultMaxFlagsPerStep
	}
	return o
}

// Verdict is a rank confirmed as a straggler by persistence.
type Verdict struct {
	Rank  int
	Group string
	// Kind is the kind most of the rank's flags had (compute on a tie).
	Kind Kind
	// OnsetStep is the first flagged step of the window that opened the
	// verdict; OpenedStep the newest decided step when it opened.
	OnsetStep, OpenedStep int64
	// OnsetUnixNano is when the episode began in data time (0 when
	// unknown): the rank's own start of the onset step on its node's clock
	// (Flag.StartUnixNano), else that step's StepDecision.StartUnixNano
	// (the earliest start of any rank, which on a job whose node clocks
	// disagree is another node's clock).
	OnsetUnixNano int64
	// LastFlaggedStep is the newest step that flagged the rank: the end of
	// the episode once it resolves.
	LastFlaggedStep int64
	// ResolvedStep is the newest decided step when the verdict resolved
	// (N clean steps after LastFlaggedStep when steps arrive in order);
	// 0 while open.
	ResolvedStep int64
	// FlaggedSteps counts the steps that flagged the rank while the verdict
	// was open, including those that opened it.
	FlaggedSteps            int
	ComputeFlags, LinkFlags int
	PeakScore, PeakRatio    float64
	// Evidence is the flag of the newest flagged step.
	Evidence Flag
}

// TransitionState says what happened to a verdict.
type TransitionState uint8

const (
	// VerdictOpened: the rank met K of N.
	VerdictOpened TransitionState = iota + 1
	// VerdictResolved: the rank went unflagged (and not hot) for N
	// decided steps.
	VerdictResolved
)

// String returns "open" or "resolved", as fault.state spells them.
func (s TransitionState) String() string {
	switch s {
	case VerdictOpened:
		return "open"
	case VerdictResolved:
		return "resolved"
	default:
		return ""
	}
}

// Transition is a verdict that opened or resolved on an Observe.
type Transition struct {
	State   TransitionState
	Verdict Verdict
}

// PersistenceStats counts what Persistence refused, so that a caller can
// export it rather than lose it silently.
type PersistenceStats struct {
	// Stale: steps older than every step of a full window.
	Stale int
	// Duplicate: steps already decided.
	Duplicate int
	// DroppedFlags: flags beyond MaxFlagsPerStep.
	DroppedFlags int
	// DroppedVerdicts: verdicts not opened because MaxTrackedRanks were open.
	DroppedVerdicts int
}

// stepFlags is one decided step in the window.
type stepFlags struct {
	step  int64
	start int64  // StepDecision.StartUnixNano
	flags []Flag // sorted by rank
	hot   []int  // sorted; StepDecision.Hot
}

// Persistence turns one job's per-step decisions into verdicts: a rank
// flagged in K of the last N decided steps opens one, N consecutive clean
// steps (neither flagged nor hot, StepDecision.Hot) resolve it. Steps may arrive out of order: the window keeps the N
// highest step numbers decided so far and ignores a step older than all of
// them (or already seen). Its memory is bounded by N·MaxFlagsPerStep flags
// and MaxTrackedRanks verdicts. It holds one job's state and is not safe
// for concurrent use; a new instance (after a consumer-group rebalance)
// needs K decided steps before it can open a verdict again.
type Persistence struct {
	opts   PersistenceOptions
	window []stepFlags // ascending by step, at most N
	open   map[int]*Verdict
	stats  PersistenceStats
}

// NewPersistence returns the empty state of one job.
func NewPersistence(opts PersistenceOptions) *Persistence {
	return &Persistence{opts: opts.withDefaults(), open: make(map[int]*Verdict)}
}

// Observe records the decision of one step and returns the verdicts that
// opened and resolved because of it, opened first, each sorted by rank.
func (p *Persistence) Observe(step int64, d StepDecision) []Transition {
	pos, found := slices.BinarySearchFunc(p.window, step, func(s stepFlags, t int64) int { return cmp.Compare(s.step, t) })
	if found {
		p.stats.Duplicate++
		return nil
	}
	if len(p.window) == p.opts.N && pos == 0 {
		p.stats.Stale++
		return nil
	}
	p.window = slices.Insert(p.window, pos, stepFlags{step: step, start: d.StartUnixNano, flags: p.keepFlags(d.Flags), hot: p.keepHot(d.Hot)})
	if len(p.window) > p.opts.N {
		p.window = slices.Delete(p.window, 0, 1)
	}
	newest := p.window[len(p.window)-1].step

	flagged := make(map[int]int) // rank -> flagged steps in the window
	for _, s := range p.window {
		for _, f := range s.flags {
			flagged[f.Rank]++
		}
	}

	var opened, resolved []Transition
	// The inserted step extends verdicts that were already open.
	inserted := p.window[slices.IndexFunc(p.window, func(s stepFlags) bool { return s.step == step })]
	for _, f := range inserted.flags {
		if v := p.open[f.Rank]; v != nil {
			v.add(step, f)
		}
	}
	candidates := make([]int, 0, len(flagged))
	for rank, count := range flagged {
		if count >= p.opts.K && p.open[rank] == nil {
			candidates = append(candidates, rank)
		}
	}
	slices.Sort(candidates) // so that MaxTrackedRanks drops the same ranks on every replica
	for _, rank := range candidates {
		if len(p.open) >= p.opts.MaxTrackedRanks {
			p.stats.DroppedVerdicts++
			continue
		}
		v := &Verdict{Rank: rank, OpenedStep: newest, LastFlaggedStep: math.MinInt64}
		first := true
		for _, s := range p.window {
			if i, ok := slices.BinarySearchFunc(s.flags, rank, func(f Flag, r int) int { return cmp.Compare(f.Rank, r) }); ok {
				if first {
					v.OnsetStep, v.OnsetUnixNano, first = s.step, s.start, false
					if own := s.flags[i].StartUnixNano; own != 0 {
						v.OnsetUnixNano = own
					}
				}
				v.add(s.step, s.flags[i])
			}
		}
		p.open[rank] = v
		opened = append(opened, Transition{State: VerdictOpened, Verdict: *v})
	}
	if len(p.window) == p.opts.N {
		for rank, v := range p.open {
			if flagged[rank] == 0 && !p.hotInWindow(rank) {
				v.ResolvedStep = newest
				resolved = append(resolved, Transition{State: VerdictResolved, Verdict: *v})
				delete(p.open, rank)
			}
		}
	}
	byRank := func(a, b Transition) int { return cmp.Compare(a.Verdict.Rank, b.Verdict.Rank) }
	slices.SortFunc(resolved, byRank) // opened already is, from the sorted candidates
	return append(opened, resolved...)
}

// Open returns the open verdicts sorted by rank.
func (p *Persistence) Open() []Verdict {
	out := make([]Verdict, 0, len(p.open))
	for _, v := range p.open {
		out = append(out, *v)
	}
	slices.SortFunc(out, func(a, b Verdict) int { return cmp.Compare(a.Rank, b.Rank) })
	return out
}

// Stats returns what Persistence refused so far.
func (p *Persistence) Stats() PersistenceStats { return p.stats }

// keepFlags copies the step's flags sorted by rank, at most MaxFlagsPerStep
// of them (the highest scores).
func (p *Persistence) keepFlags(flags []Flag) []Flag {
	kept := slices.Clone(flags)
	if len(kept) > p.opts.MaxFlagsPerStep {
		slices.SortFunc(kept, func(a, b Flag) int { return cmp.Compare(b.Score, a.Score) })
		p.stats.DroppedFlags += len(kept) - p.opts.MaxFlagsPerStep
		kept = kept[:p.opts.MaxFlagsPerStep]
	}
	slices.SortFunc(kept, func(a, b Flag) int { return cmp.Compare(a.Rank, b.Rank) })
	// A rank reported twice in one step counts once.
	return slices.CompactFunc(kept, func(a, b Flag) bool { return a.Rank == b.Rank })
}

// keepHot copies the step's hot ranks, sorted, at most MaxFlagsPerStep of
// them (only ranks with an open verdict are hot, so the bound rarely bites).
func (p *Persistence) keepHot(hot []int) []int {
	if len(hot) == 0 {
		return nil
	}
	kept := slices.Clone(hot[:min(len(hot), p.opts.MaxFlagsPerStep)])
	slices.Sort(kept)
	return kept
}

// hotInWindow reports whether any step of the window ran rank hot.
func (p *Persistence) hotInWindow(rank int) bool {
	for _, s := range p.window {
		if _, ok := slices.BinarySearch(s.hot, rank); ok {
			return true
		}
	}
	return false
}

// IsOpen reports whether rank has an open verdict.
func (p *Persistence) IsOpen(rank int) bool { return p.open[rank] != nil }

// add folds one flagged step into the verdict.
func (v *Verdict) add(step int64, f Flag) {
	v.FlaggedSteps++
	if f.Kind == KindLink {
		v.LinkFlags++
	} else {
		v.ComputeFlags++
	}
	v.Kind = KindCompute
	if v.LinkFlags > v.ComputeFlags {
		v.Kind = KindLink
	}
	v.PeakScore = max(v.PeakScore, f.Score)
	r := f.ComputeRatio
	if f.Kind == KindLink {
		r = f.WaitRatio
	}
	v.PeakRatio = max(v.PeakRatio, r)
	if step >= v.LastFlaggedStep {
		v.LastFlaggedStep = step
		v.Evidence = f
		v.Group = f.Group
	}
}

// stampOwnStarts gives each flag its rank's own start of the step
// (RankSample.StartUnixNano). Flags are in sample order (StepDecision), so
// one walk matches them; a flag out of that order keeps 0 (the step's
// start stands in).
func stampOwnStarts(flags []Flag, samples []RankSample) {
	k := 0
	for i := range samples {
		if k == len(flags) {
			return
		}
		if samples[i].Rank == flags[k].Rank {
			flags[k].StartUnixNano = samples[i].StartUnixNano
			k++
		}
	}
}
