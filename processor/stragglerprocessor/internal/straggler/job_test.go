package straggler

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"
	"unsafe"
)

// jobRun is what a Job did over a scenario.
type jobRun struct {
	trs        []Transition
	jobOpened  []JobVerdict
	jobClosed  int
	flagged    map[int][]int // rank -> steps that flagged it
	shareSteps int           // steps whose slow share was exceeded
	warming    []int         // steps decided while warming up
}

func runJob(steps int, step func(int) []RankSample, opts JobOptions) jobRun {
	r := jobRun{flagged: map[int][]int{}}
	j := NewJob(opts)
	for i := range steps {
		d := j.Decide(int64(i), step(i), int64(i)*int64(time.Second))
		for _, f := range d.Flags {
			r.flagged[f.Rank] = append(r.flagged[f.Rank], i)
		}
		r.trs = append(r.trs, d.Transitions...)
		if d.ShareExceeded {
			r.shareSteps++
		}
		if d.Warming {
			r.warming = append(r.warming, i)
		}
		switch d.JobTransition {
		case VerdictOpened:
			r.jobOpened = append(r.jobOpened, *d.JobVerdict)
		case VerdictResolved:
			r.jobClosed++
		}
	}
	return r
}

func (r jobRun) opened() []Verdict {
	var out []Verdict
	for _, tr := range r.trs {
		if tr.State == VerdictOpened {
			out = append(out, tr.Verdict)
		}
	}
	return out
}

// stages returns ranks in len(levels) stages of perStage ranks, stage s
// computing levels[s]·base with jitter; labelled puts the stage in Group.
func stages(rng *rand.Rand, levels []float64, perStage int, base time.Duration, sigma float64, labelled bool) []RankSample {
	s := make([]RankSample, 0, len(levels)*perStage)
	for st, l := range levels {
		for k := 0; k < perStage; k++ {
			x := RankSample{Rank: len(s), Compute: time.Duration(float64(base) * l * (1 + sigma*rng.NormFloat64()))}
			if labelled {
				x.Group = fmt.Sprint(st)
			}
			s = append(s, x)
		}
	}
	return s
}

// The hard negative: a pipeline without stage labels whose stages
// legitimately compute 1.0, 1.3, 1.6 and 2.2 times the first (and one whose
// last stage alone is 1.6x). Before, the heavier stages were opened as
// compute stragglers; now the groups are inferred and nothing opens.
func TestUnlabelledPipelineOpensNothing(t *testing.T) {
	for _, levels := range [][]float64{{1.0, 1.3, 1.6, 2.2}, {1, 1, 1, 1.6}, {1.0, 1.2, 1.45, 1.75}} {
		for _, perStage := range []int{2, 4, 16} {
			t.Run(fmt.Sprint(levels, perStage), func(t *testing.T) {
				rng := scenarioRNG(t, uint64(perStage)+7)
				step := func(int) []RankSample { return stages(rng, levels, perStage, 400*ms, 0.03, false) }
				r := runJob(200, step, JobOptions{})
				if len(r.trs) != 0 || len(r.jobOpened) != 0 || len(r.flagged) != 0 {
					t.Errorf("opened%s, job verdicts %v, flagged %v; want nothing", describe(r.trs), r.jobOpened, r.flagged)
				}
				if !slices.Equal(r.warming, []int{0, 1, 2, 3, 4}) {
					t.Errorf("warming steps %v, want the first five", r.warming)
				}
				// The control: the old per-step rule over the whole job opens the heavy stages.
				trs, _ := runSteps(20, step, Options{})
				if levels[0] == levels[2] && len(trs) == 0 {
					t.Error("DecideStep+Persistence opened nothing: the scenario does not test inference")
				}
			})
		}
	}
}

// Nothing is flagged while an unlabelled job's groups are being inferred,
// not even a rank three times slower than the rest.
func TestNoFlagsWhileInferringGroups(t *testing.T) {
	j := NewJob(JobOptions{})
	rng := rand.New(rand.NewPCG(1, 1))
	for i := range DefaultWarmup {
		s := jittered(rng, 8, 400*ms, 0.02)
		s[3].Compute *= 3
		d := j.Decide(int64(i), s, 0)
		if !d.Warming || len(d.Flags) != 0 || slices.ContainsFunc(d.Ranks, func(r RankResult) bool { return r.Flagged }) {
			t.Fatalf("step %d: warming %v, flags %+v", i, d.Warming, d.Flags)
		}
	}
	// Rank 3 has been 3x since the job's first step: alone on its level
	// while the other seven share one, it is judged against the job
	// (issue 30; before, it was a stage of its own and never flagged).
	for i := DefaultWarmup; i < 40; i++ {
		s := jittered(rng, 8, 400*ms, 0.02)
		s[3].Compute *= 3
		d := j.Decide(int64(i), s, 0)
		if d.Warming || len(d.Flags) != 1 || d.Flags[0].Rank != 3 || math.Abs(d.Flags[0].ComputeRatio-3) > 0.3 {
			t.Fatalf("step %d: warming %v, flags %+v; want rank 3 at about 3x the job", i, d.Warming, d.Flags)
		}
	}
}

// A rank slow since the job's first step is opened without labels, with or
// without hardware trouble on its span (issue 30; before, only with).
func TestStableSlowRankOpensWithoutLabels(t *testing.T) {
	for _, hw := range []bool{false, true} {
		rng := rand.New(rand.NewPCG(2, 2))
		step := func(int) []RankSample {
			s := jittered(rng, 16, 400*ms, 0.03)
			s[9].Compute = time.Duration(float64(s[9].Compute) * 2.3)
			s[9].HardwareTrouble = hw
			return s
		}
		r := runJob(30, step, JobOptions{})
		opened := r.opened()
		if len(opened) != 1 || opened[0].Rank != 9 || opened[0].OpenedStep != DefaultWarmup+2 {
			t.Errorf("hardware trouble %v: opened %+v, want rank 9 on the third step after warm-up", hw, opened)
		}
	}
}

// A rank that slows down after the warm-up is found without labels, the
// onset carried as data time.
func TestUnlabelledStragglerAfterWarmup(t *testing.T) {
	const onset = 20
	rng := scenarioRNG(t, 11)
	step := func(i int) []RankSample {
		s := stages(rng, []float64{1, 1.3, 1.6, 2.2}, 4, 400*ms, 0.03, false)
		if i >= onset {
			s[5].Compute = time.Duration(float64(s[5].Compute) * 1.8) // a stage-1 rank
		}
		return s
	}
	r := runJob(40, step, JobOptions{})
	opened := r.opened()
	if len(opened) != 1 || opened[0].Rank != 5 || opened[0].OnsetStep != onset || opened[0].OpenedStep != onset+2 {
		t.Fatalf("opened%s; want rank 5 with onset %d, opened on its third slow step", describe(r.trs), onset)
	}
	if got := opened[0].OnsetUnixNano; got != onset*int64(time.Second) {
		t.Errorf("onset time %d, want the onset step's start %d", got, onset*int64(time.Second))
	}
}

// Stages of two ranks: median and MAD cannot flag, the rank's own history
// can. 8 stages x 2 ranks; one rank becomes 2x slower at step 20 and is
// opened by its third slow step. A stage whose two ranks both become 2x
// slower while the other stages keep their pace is compared with those
// stages (normalised by their levels): both ranks open, no job verdict.
// A stage uniformly 2x slower from the first step is its level: nothing.
func TestTwoRankStages(t *testing.T) {
	const onset = 20
	levels := []float64{1, 1.05, 1.1, 1.0, 1.2, 1.1, 1.0, 1.6}
	for _, labelled := range []bool{true, false} {
		spaced := levels
		if !labelled {
			// Without labels the stages must differ to be told apart.
			spaced = []float64{1, 1.25, 1.55, 1.95, 2.45, 3.05, 3.8, 4.8}
		}
		t.Run(fmt.Sprint("labelled=", labelled), func(t *testing.T) {
			rng := scenarioRNG(t, 21)
			one := func(i int) []RankSample {
				s := stages(rng, spaced, 2, 400*ms, 0.03, labelled)
				if i >= onset {
					s[7].Compute *= 2
				}
				return s
			}
			r := runJob(60, one, JobOptions{})
			opened := r.opened()
			if len(opened) != 1 || opened[0].Rank != 7 || opened[0].OnsetStep != onset || opened[0].OpenedStep > onset+2 {
				t.Errorf("one rank 2x: opened%s; want rank 7, onset %d, open by its third slow step", describe(r.trs), onset)
			}
			if len(r.jobOpened) != 0 {
				t.Errorf("job verdicts %+v", r.jobOpened)
			}
			stage := func(i int) []RankSample {
				s := stages(rng, spaced, 2, 400*ms, 0.03, labelled)
				if i >= onset {
					s[6].Compute *= 2
					s[7].Compute *= 2
				}
				return s
			}
			r = runJob(60, stage, JobOptions{})
			opened = r.opened()
			if len(opened) != 2 || opened[0].Rank+opened[1].Rank != 13 || opened[0].OnsetStep != onset || len(r.jobOpened) != 0 {
				t.Errorf("a stage 2x slower mid-run: opened%s, job verdicts %+v; want ranks 6 and 7 at onset %d", describe(r.trs), r.jobOpened, onset)
			}
			static := func(int) []RankSample {
				s := stages(rng, spaced, 2, 400*ms, 0.03, labelled)
				s[6].Compute *= 2
				s[7].Compute *= 2
				return s
			}
			r = runJob(60, static, JobOptions{})
			if len(r.trs) != 0 || len(r.jobOpened) != 0 {
				t.Errorf("a stage uniformly 2x slower from the first step opened%s, job verdicts %+v", describe(r.trs), r.jobOpened)
			}
		})
	}
}

// Half-slow: of 10 workers, 5 run 3-4x slower than the other 5 from the
// first step. At most one job-level finding for the run and no rank
// verdict; then a real episode (two of the slow workers a further 4x
// slower) opens verdicts on those two.
func TestHalfSlowJob(t *testing.T) {
	const onset, end = 150, 180
	rng := scenarioRNG(t, 31)
	level := []float64{1, 1, 1, 1, 1, 3, 3.3, 3.6, 3.8, 4}
	for _, labelled := range []bool{false, true} {
		t.Run(fmt.Sprint("labelled=", labelled), func(t *testing.T) {
			step := func(i int) []RankSample {
				s := make([]RankSample, 10)
				for w := range s {
					s[w] = RankSample{Rank: w, Compute: time.Duration(float64(100*ms) * level[w] * (1 + 0.08*rng.NormFloat64()))}
					if labelled {
						s[w].Group = "0" // one data-parallel group: the labels say nothing
					}
				}
				if i >= onset && i < end {
					s[6].Compute *= 4
					s[8].Compute *= 4
				}
				return s
			}
			r := runJob(300, step, JobOptions{})
			opened := r.opened()
			for _, v := range opened {
				if (v.Rank != 6 && v.Rank != 8) || v.OnsetStep < onset || v.OpenedStep > onset+4 {
					t.Errorf("unexpected verdict %+v", v)
				}
			}
			if !slices.ContainsFunc(opened, func(v Verdict) bool { return v.Rank == 6 }) || !slices.ContainsFunc(opened, func(v Verdict) bool { return v.Rank == 8 }) {
				t.Errorf("the episode was not opened on workers 6 and 8:%s", describe(r.trs))
			}
			if len(r.jobOpened) > 1 {
				t.Errorf("%d job-level findings, want at most one: %+v", len(r.jobOpened), r.jobOpened)
			}
			t.Logf("%s", describe(r.trs))
		})
	}
}

// More than a third of a group slow at once is one job-level finding, not
// that many stragglers.
func TestSlowShareIsAJobVerdict(t *testing.T) {
	const onset = 10
	rng := scenarioRNG(t, 41)
	step := func(i int) []RankSample {
		s := jittered(rng, 12, 400*ms, 0.03)
		for k := range s {
			s[k].Group = "dp"
		}
		if i >= onset && i < onset+20 {
			for _, k := range []int{1, 4, 7, 9, 10} { // 5 of 12 > 1/3
				s[k].Compute = time.Duration(float64(s[k].Compute) * 2)
			}
		}
		return s
	}
	r := runJob(60, step, JobOptions{})
	if len(r.trs) != 0 {
		t.Errorf("rank verdicts opened:%s", describe(r.trs))
	}
	if len(r.jobOpened) != 1 || r.jobOpened[0].OnsetStep != onset || r.jobOpened[0].OpenedStep != onset+2 || r.jobClosed != 1 {
		t.Fatalf("job verdicts %+v (closed %d); want one, onset %d, opened at %d, resolved", r.jobOpened, r.jobClosed, onset, onset+2)
	}
	if s := r.jobOpened[0].PeakShare; math.Abs(s-5.0/12) > 1e-9 {
		t.Errorf("peak share %v, want 5/12", s)
	}
	// Four of twelve is a third, not more: rank verdicts.
	r = runJob(30, func(i int) []RankSample {
		s := step(0)
		if i >= onset {
			for _, k := range []int{1, 4, 7, 9} {
				s[k].Compute *= 2
			}
		}
		return s
	}, JobOptions{})
	if len(r.opened()) != 4 || len(r.jobOpened) != 0 {
		t.Errorf("a third slow: opened%s, job verdicts %+v; want four rank verdicts", describe(r.trs), r.jobOpened)
	}
}

// Hysteresis: a borderline rank (26-30% over its group at times, 12-20%
// otherwise) opens one verdict that stays open; plain K-of-N opens and
// resolves it over and over.
func TestBorderlineRankDoesNotFlap(t *testing.T) {
	rng := scenarioRNG(t, 51)
	step := func(i int) []RankSample {
		s := jittered(rng, 16, 400*ms, 0.01)
		for k := range s {
			s[k].Group = "0"
		}
		if i >= 10 {
			f := 1.12 + 0.08*rng.Float64() // above the close margin, under the flag
			if (i/6)%2 == 0 && i%6 < 3 {
				f = 1.26 + 0.04*rng.Float64() // three flagged steps every twelve
			}
			s[2].Compute = time.Duration(float64(s[2].Compute) * f)
		}
		return s
	}
	r := runJob(200, step, JobOptions{})
	if n := len(r.opened()); n != 1 {
		t.Errorf("%d verdicts opened, want one that stays open:%s", n, describe(r.trs))
	}
	trs, _ := runSteps(200, step, Options{})
	if len(trs) < 6 {
		t.Errorf("the control (no hysteresis) made %d transitions, expected it to flap", len(trs))
	}
	t.Logf("hysteresis: %d transitions; plain k of n: %d", len(r.trs), len(trs))
}

func TestJobOptionsValidate(t *testing.T) {
	if err := DefaultJobOptions().Validate(); err != nil {
		t.Fatal(err)
	}
	if err := (JobOptions{}).Validate(); err != nil {
		t.Fatal(err)
	}
	for name, o := range map[string]JobOptions{
		"max_slow_share": {MaxSlowShare: 1},
		"close_excess":   {CloseExcess: 0.3},
		"self_excess":    {SelfExcess: math.NaN()},
		"warmup_steps":   {Warmup: 16},
		"stage_gap":      {StageGap: -1},
		"max_ranks":      {MaxRanks: -1},
	} {
		if err := o.Validate(); err == nil || !containsStr(err.Error(), name) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func containsStr(s, sub string) bool {
	return len(sub) == 0 || (len(s) >= len(sub) && indexStr(s, sub) >= 0)
}

func indexStr(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

// A Job never panics or writes a NaN, whatever it is fed.
func TestJobSurvivesGarbage(t *testing.T) {
	j := NewJob(JobOptions{MaxRanks: 8, Warmup: 1})
	rng := rand.New(rand.NewPCG(9, 9))
	for i := range 300 {
		n := rng.IntN(12)
		s := make([]RankSample, n)
		for k := range s {
			s[k] = RankSample{Rank: rng.IntN(20) - 5, Compute: time.Duration(rng.Int64N(1<<40) - 1<<20), CollectiveWait: time.Duration(rng.Int64N(1 << 30)),
				HardwareTrouble: rng.IntN(5) == 0}
			if rng.IntN(3) == 0 {
				s[k].Group = fmt.Sprint(rng.IntN(3))
			}
			if rng.IntN(50) == 0 {
				s[k].Compute = math.MaxInt64
			}
		}
		d := j.Decide(int64(rng.IntN(400)), s, 0)
		for _, f := range d.Flags {
			if math.IsNaN(f.Score) || math.IsInf(f.Score, 0) || math.IsNaN(f.ComputeRatio) || math.IsInf(f.ComputeRatio, 0) {
				t.Fatalf("step %d: non-finite flag %+v", i, f)
			}
		}
		if math.IsNaN(d.SlowShare) {
			t.Fatal("NaN share")
		}
	}
}

// BenchmarkJobDecide16384 is Job.Decide on the step of BenchmarkDecideStep16384
// (labelled, rank 1045 2.3x): DecideStep plus the job's rules and
// persistence, in a job past its warm-up. Compare the two for the job's cost.
func BenchmarkJobDecide16384(b *testing.B) {
	s := sample16384()
	j := NewJob(JobOptions{})
	for i := range 20 {
		j.Decide(int64(i), s, 0)
	}
	step := int64(20)
	b.ReportAllocs()
	for b.Loop() {
		j.Decide(step, s, 0)
		step++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e6, "ms/step")
}

// A Job's steady state allocates what DecideStep does, plus Persistence's
// copies: its own scratch is reused.
func TestJobDecideAllocations(t *testing.T) {
	s := sample16384()
	j := NewJob(JobOptions{})
	for i := range 20 {
		j.Decide(int64(i), s, 0)
	}
	step := int64(20)
	job := testing.AllocsPerRun(5, func() { j.Decide(step, s, 0); step++ })
	decide := testing.AllocsPerRun(5, func() { DecideStep(s, Options{}) })
	if job > decide+12 {
		t.Errorf("Job.Decide: %.0f allocations per step, DecideStep %.0f: the job's scratch is not reused", job, decide)
	}
	t.Logf("allocations per step: Job.Decide %.0f, DecideStep %.0f", job, decide)
}

// A new job's first step at 16,384 ranks (ranks in ascending order, as
// they arrive) grows the rank histories geometrically: bytes linear in the
// ranks, not a new array and a copy of every rank so far per new rank
// (which was 10 GB of copying and kept the 16,384-rank suite from keeping
// up).
func TestJobFirstStepGrowsLinearly(t *testing.T) {
	s := sample16384()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	NewJob(JobOptions{}).Decide(0, s, 0)
	runtime.ReadMemStats(&after)
	allocated := after.TotalAlloc - before.TotalAlloc
	perRank := unsafe.Sizeof(rankHistory{})
	if limit := uint64(64 * len(s) * int(perRank)); allocated > limit {
		t.Errorf("first step of a %d-rank job allocated %d bytes, more than %d (64 histories per rank)", len(s), allocated, limit)
	}
	t.Logf("first step of %d ranks: %d bytes", len(s), allocated)
}
