package straggler

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// Issue 30: unlabelled and tiny jobs, noisy ranks and half-slow jobs.

// A rank of the first stage 2.3x its stage from the job's first step, no
// labels: alone on its level while every stage holds 16 ranks, it opens
// by its third step after the warm-up. A rank whose level falls between two
// stages' (1.9x a first-stage rank among stages 1.0-2.2) is left alone: it
// may be a fast rank of the slower stage and holds no one up.
func TestSlowFromStartWithoutLabels(t *testing.T) {
	for _, tc := range []struct {
		levels []float64
		factor float64
		want   []int
	}{
		{[]float64{1.0, 1.2, 1.45, 1.75}, 2.3, []int{5}},
		{[]float64{1, 1, 1, 1.6}, 2.3, []int{5}},
		{[]float64{1}, 2.3, []int{5}},
		{[]float64{1.0, 1.3, 1.6, 2.2}, 1.9, nil},
	} {
		t.Run(fmt.Sprint(tc.levels, tc.factor), func(t *testing.T) {
			rng := scenarioRNG(t, 61)
			r := runJob(40, func(int) []RankSample {
				s := stages(rng, tc.levels, 64/len(tc.levels), 400*ms, 0.02, false)
				s[5].Compute = time.Duration(float64(s[5].Compute) * tc.factor)
				return s
			}, JobOptions{})
			var got []int
			for _, v := range r.opened() {
				got = append(got, v.Rank)
				if v.OpenedStep > DefaultWarmup+3 {
					t.Errorf("rank %d opened at step %d, want by the third step after warm-up", v.Rank, v.OpenedStep)
				}
			}
			if !slices.Equal(got, tc.want) || len(r.jobOpened) != 0 {
				t.Errorf("opened%s, job verdicts %+v; want %v", describe(r.trs), r.jobOpened, tc.want)
			}
		})
	}
}

// 1,024 ranks, 256 to a stage, stages 1.0-1.2-1.45-1.75 with 2-3% jitter:
// the slowest ranks of a stage and the fastest of the next are closer than
// StageGap, but far apart against each stage's own spread, so the four
// stages still split. A first-stage rank 2.3x from the first step is alone
// on its level and opens; without it (the control) nothing opens.
func TestSlowFromStartManyRanksPerStage(t *testing.T) {
	for _, sigma := range []float64{0.02, 0.03} {
		for _, slow := range []bool{true, false} {
			for seed := range uint64(3) {
				rng := rand.New(rand.NewPCG(seed, 31))
				j := NewJob(JobOptions{})
				var opened []int
				for i := range 12 {
					s := stages(rng, []float64{1.0, 1.2, 1.45, 1.75}, 256, 400*ms, sigma, false)
					if slow {
						s[5].Compute = time.Duration(float64(s[5].Compute) * 2.3)
					}
					d := j.Decide(int64(i), s, int64(i)*int64(time.Second))
					for _, tr := range d.Transitions {
						if tr.State == VerdictOpened {
							opened = append(opened, tr.Verdict.Rank)
						}
					}
				}
				want := []int(nil)
				if slow {
					want = []int{5}
				}
				if !slices.Equal(opened, want) || len(j.levels) != 4+len(want) || !j.stageLike {
					t.Errorf("sigma %v slow %v seed %d: opened %v, want %v; levels %v, stage-like %v", sigma, slow, seed, opened, want, j.levels, j.stageLike)
				}
			}
		}
	}
}

// A rank slow from the first step whose spans missed the warm-up (it is
// placed after the groups were inferred) gets a level of its own, as it
// would have at inference, and opens; it does not join the slowest stage.
func TestSlowFromStartPlacedLate(t *testing.T) {
	rng := scenarioRNG(t, 65)
	r := runJob(40, func(i int) []RankSample {
		s := stages(rng, []float64{1.0, 1.2, 1.45, 1.75}, 16, 400*ms, 0.02, false)
		s[5].Compute = time.Duration(float64(s[5].Compute) * 2.3)
		if i < 3 {
			s = slices.Delete(s, 5, 6) // its first spans were late
		}
		return s
	}, JobOptions{})
	opened := r.opened()
	if len(opened) != 1 || opened[0].Rank != 5 {
		t.Errorf("opened%s; want rank 5", describe(r.trs))
	}
}

// Labelled stages of two ranks: a rank 2x its only peer from the first
// step opens (the pair is compared); its steady peer does not.
func TestTwoRankStageSlowFromStart(t *testing.T) {
	rng := scenarioRNG(t, 62)
	r := runJob(40, func(int) []RankSample {
		s := stages(rng, []float64{1, 1.3, 1.6, 2.2, 1, 1.3, 1.6, 2.2}, 2, 400*ms, 0.03, true)
		s[7].Compute *= 2
		return s
	}, JobOptions{})
	opened := r.opened()
	if len(opened) != 1 || opened[0].Rank != 7 || opened[0].OpenedStep > DefaultWarmup+3 {
		t.Fatalf("opened%s; want rank 7 once its peer has a baseline", describe(r.trs))
	}
	if e := opened[0].Evidence; math.Abs(e.ComputeRatio-2) > 0.25 || e.GroupMedianCompute <= 0 {
		t.Errorf("evidence %+v: want its compute about 2x its peer's", e)
	}
}

// A job of two ranks, one 2x from step 12: found, labelled or not, with its
// compute about 2x its own level (the job's pace is its peer's, not the
// median of both, which made it 1.33x). Not opened: one rank 40 % faster
// for four steps, and (without labels) two ranks at different levels from
// the first step, which may be two stages.
func TestTwoRankJob(t *testing.T) {
	const onset = 12
	for _, labelled := range []bool{false, true} {
		t.Run(fmt.Sprint("labelled=", labelled), func(t *testing.T) {
			rng := scenarioRNG(t, 63)
			two := func(f0, f1 func(int) float64) func(int) []RankSample {
				return func(i int) []RankSample {
					s := jittered(rng, 2, 400*ms, 0.03)
					s[0].Compute = time.Duration(float64(s[0].Compute) * f0(i))
					s[1].Compute = time.Duration(float64(s[1].Compute) * f1(i))
					if labelled {
						s[0].Group, s[1].Group = "0", "0"
					}
					return s
				}
			}
			one := func(int) float64 { return 1 }
			r := runJob(40, two(one, func(i int) float64 { return map[bool]float64{true: 2, false: 1}[i >= onset] }), JobOptions{})
			opened := r.opened()
			if len(opened) != 1 || opened[0].Rank != 1 || opened[0].OnsetStep != onset || opened[0].OpenedStep != onset+2 {
				t.Fatalf("rank 1 2x from step %d: opened%s; want rank 1, opened on its third slow step", onset, describe(r.trs))
			}
			if got := opened[0].PeakRatio; math.Abs(got-2) > 0.25 {
				t.Errorf("peak ratio %.2f, want about 2", got)
			}
			r = runJob(40, two(func(i int) float64 { return map[bool]float64{true: 0.6, false: 1}[i >= onset && i < onset+4] }, one), JobOptions{})
			if len(r.trs) != 0 {
				t.Errorf("rank 0 40%% faster: opened%s", describe(r.trs))
			}
			if !labelled {
				r = runJob(40, two(one, func(int) float64 { return 2 }), JobOptions{})
				if len(r.trs) != 0 {
					t.Errorf("two levels from the first step, no labels: opened%s", describe(r.trs))
				}
			}
		})
	}
}

// noisyBoundary is issue 30's job: two unlabelled stages (1.0, 1.45); rank
// 31 of the first computes x lognormal(0, sigma) every step, so its level
// lands anywhere near the boundary; rank 10 of the first is 1.3x from step
// 12.
func noisyBoundary(rng *rand.Rand, ranks int, sigma float64) func(int) []RankSample {
	return func(i int) []RankSample {
		s := stages(rng, []float64{1, 1.45}, ranks/2, 400*ms, 0.02, false)
		s[31].Compute = time.Duration(float64(s[31].Compute) * math.Exp(sigma*rng.NormFloat64()))
		if i >= 12 {
			s[10].Compute = time.Duration(float64(s[10].Compute) * 1.3)
		}
		return s
	}
}

// Stage inference tolerates a noisy rank at a stage boundary: the stable
// ranks draw the groups, the noisy one joins the nearest; the 1.3x rank
// opens and the noisy rank never does (its swings are judged against its
// own noise). Before, groups split only where both neighbours were stable,
// and 38 of these 300 seeds missed rank 10 or opened rank 31; now one does
// (seed 118: rank 31's first five times happened to be quiet and low, and
// three of its next four 1.3-1.6x that level), which this test allows.
func TestNoisyRankAtStageBoundary(t *testing.T) {
	for _, tc := range []struct{ ranks, seeds, allowed int }{{64, 300, 1}, {1024, 4, 0}} {
		t.Run(fmt.Sprint(tc.ranks), func(t *testing.T) {
			bad := 0
			for seed := range uint64(tc.seeds) {
				r := runJob(36, noisyBoundary(rand.New(rand.NewPCG(seed, 30)), tc.ranks, 0.15), JobOptions{})
				opened := r.opened()
				if len(opened) != 1 || opened[0].Rank != 10 || opened[0].OnsetStep < 12 || opened[0].OpenedStep > 16 || len(r.jobOpened) != 0 {
					bad++
					t.Logf("seed %d: opened%s; want rank 10 only, opened by step 16", seed, describe(r.trs))
				}
			}
			if bad > tc.allowed {
				t.Errorf("%d ranks: %d of %d seeds wrong, want at most %d", tc.ranks, bad, tc.seeds, tc.allowed)
			}
		})
	}
}

// Half the ranks (the odd ones) 3-4x slower all run; ranks 10 and 44 of the
// fast half spike to 1.8x their own level for six steps, still faster than
// the job's median: no verdict, labelled as one group or not. The control:
// the same spike to 5x, slower than the slow half, opens both.
func TestSpikesNoSlowerThanTheGroup(t *testing.T) {
	for _, labelled := range []bool{false, true} {
		for _, spike := range []float64{1.8, 5} {
			t.Run(fmt.Sprint("labelled=", labelled, " spike=", spike), func(t *testing.T) {
				rng := scenarioRNG(t, 64)
				slow := make([]float64, 64)
				for k := range slow {
					slow[k] = 1
					if k%2 == 1 {
						slow[k] = 3 + rng.Float64()
					}
				}
				r := runJob(36, func(i int) []RankSample {
					s := jittered(rng, 64, 100*ms, 0.03)
					for k := range s {
						s[k].Compute = time.Duration(float64(s[k].Compute) * slow[k])
						if i >= 14 && i < 20 && (k == 10 || k == 44) {
							s[k].Compute = time.Duration(float64(s[k].Compute) * spike)
						}
						if labelled {
							s[k].Group = "dp"
						}
					}
					return s
				}, JobOptions{})
				var got []int
				for _, v := range r.opened() {
					got = append(got, v.Rank)
				}
				slices.Sort(got)
				want := []int(nil)
				if spike > 4 {
					want = []int{10, 44}
				}
				if !slices.Equal(got, want) || len(r.jobOpened) != 0 {
					t.Errorf("opened%s, job verdicts %+v; want %v", describe(r.trs), r.jobOpened, want)
				}
			})
		}
	}
}

// The slow half drawn so that its levels' median absolute deviation stays
// under stageSpread (18 of its 32 ranks at 3.4-3.6x, the rest spread to 3x
// and 4x; gpusim's seed 30004 drew such a half): two groups of 32 looked
// like two stages, and ranks 10 and 44 of the fast half spiking to 1.8x
// their own level opened. The middle 80% of the slow half spans about 20%,
// no stage: nothing opens.
func TestSpikesSlowHalfNoStage(t *testing.T) {
	var half []float64
	for k := range 18 {
		half = append(half, 3.4+0.2*float64(k)/17)
	}
	for k := range 7 {
		half = append(half, 3.0+0.3*float64(k)/6, 3.7+0.3*float64(k)/6)
	}
	for seed := range uint64(5) {
		rng := rand.New(rand.NewPCG(seed, 30004))
		j := NewJob(JobOptions{})
		var opened []int
		for i := range 36 {
			s := jittered(rng, 64, 100*ms, 0.02)
			for k := range s {
				f := 1.0
				if k%2 == 1 {
					f = half[k/2]
				}
				if i >= 14 && i < 20 && (k == 10 || k == 44) {
					f *= 1.8
				}
				s[k].Compute = time.Duration(float64(s[k].Compute) * f)
			}
			d := j.Decide(int64(i), s, int64(i)*int64(time.Second))
			for _, tr := range d.Transitions {
				if tr.State == VerdictOpened {
					opened = append(opened, tr.Verdict.Rank)
				}
			}
		}
		if len(opened) != 0 || j.stageLike {
			t.Errorf("seed %d: opened %v, stage-like %v (levels %v); want nothing, no stages", seed, opened, j.stageLike, j.levels)
		}
	}
}

// The job's pace leaves the rank judged out: of two ranks, one 2x its own
// level, it is 2x after the pace and its peer 0.67x; a checkpoint slowing
// both 4x is the pace (1 each); one rank 40 % faster does not make its
// peer slow (leaving a rank out never raises the pace, nor takes it below
// the median of all or 1).
func TestPaceLeavesTheRankOut(t *testing.T) {
	for _, tc := range []struct {
		raw, want []float64
	}{
		{[]float64{1, 2}, []float64{1 / 1.5, 2}},
		{[]float64{4, 4}, []float64{1, 1}},
		{[]float64{1, 0.6}, []float64{1.25, 0.75}},
		{[]float64{1, 1, 2}, []float64{1, 1, 2}},
		{[]float64{1, 1.1, 0.9, 1.05, 3}, []float64{1 / 1.05, 1.1 / 1.025, 0.9 / 1.05, 1, 3 / 1.025}},
		{[]float64{2}, []float64{1}},
		{[]float64{-1, 2, 1}, []float64{-1, 2, 1 / 1.5}},
	} {
		j := NewJob(JobOptions{})
		j.raw, j.own, j.scaled = tc.raw, make([]float64, len(tc.raw)), nil
		for _, x := range tc.raw {
			if x >= 0 {
				j.scaled = append(j.scaled, saturate(x*ratioScale))
			}
		}
		j.normalise()
		for i := range tc.want {
			if math.Abs(j.own[i]-tc.want[i]) > 1e-4 {
				t.Errorf("raw %v: own %v, want %v", tc.raw, j.own, tc.want)
				break
			}
		}
	}
}
