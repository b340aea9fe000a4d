package straggler

import (
	"cmp"
	"encoding/csv"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"
)

func flagging(ranks ...int) StepDecision {
	var d StepDecision
	for _, r := range ranks {
		d.Flags = append(d.Flags, Flag{Rank: r, Kind: KindCompute, Score: 10 + float64(r), ComputeRatio: 2})
	}
	return d
}

func TestKOfNOpensAndNCleanStepsResolve(t *testing.T) {
	p := NewPersistence(PersistenceOptions{})
	var got []Transition
	pattern := map[int64]bool{1: true, 2: true, 3: true} // steps 1..3 flag rank 7
	for step := int64(1); step <= 8; step++ {
		d := StepDecision{}
		if pattern[step] {
			d = flagging(7)
		}
		for _, tr := range p.Observe(step, d) {
			got = append(got, tr)
			t.Logf("step %d: %s %+v", step, tr.State, tr.Verdict)
		}
	}
	if len(got) != 2 || got[0].State != VerdictOpened || got[1].State != VerdictResolved {
		t.Fatalf("transitions %+v, want one open then one resolve", got)
	}
	open, resolved := got[0].Verdict, got[1].Verdict
	if open.Rank != 7 || open.OnsetStep != 1 || open.OpenedStep != 3 || open.FlaggedSteps != 3 || open.Kind != KindCompute {
		t.Errorf("opened %+v, want rank 7, onset 1, opened at 3 after 3 flags", open)
	}
	// Steps 4..8 are the first full window without a flag.
	if resolved.ResolvedStep != 8 || resolved.LastFlaggedStep != 3 {
		t.Errorf("resolved %+v, want last flagged 3, resolved at 8", resolved)
	}
	if len(p.Open()) != 0 {
		t.Errorf("still open: %+v", p.Open())
	}
}

func TestTwoOfFiveNeverOpens(t *testing.T) {
	p := NewPersistence(PersistenceOptions{})
	for step := range int64(100) {
		d := StepDecision{}
		if step%5 == 0 || step%5 == 2 { // flagged twice in every window of five
			d = flagging(1)
		}
		if tr := p.Observe(step, d); len(tr) != 0 {
			t.Fatalf("step %d: %+v", step, tr)
		}
	}
}

func TestOutOfOrderStaleAndDuplicateSteps(t *testing.T) {
	p := NewPersistence(PersistenceOptions{})
	if tr := p.Observe(10, flagging(4)); tr != nil {
		t.Fatal(tr)
	}
	if tr := p.Observe(12, flagging(4)); tr != nil {
		t.Fatal(tr)
	}
	tr := p.Observe(11, flagging(4)) // late, but within the window
	if len(tr) != 1 || tr[0].Verdict.OnsetStep != 10 || tr[0].Verdict.OpenedStep != 12 || tr[0].Verdict.LastFlaggedStep != 12 {
		t.Fatalf("late step 11: %+v, want an open with onset 10 at step 12", tr)
	}
	if tr := p.Observe(12, flagging(4)); tr != nil || p.Stats().Duplicate != 1 {
		t.Errorf("duplicate step 12: %+v, stats %+v", tr, p.Stats())
	}
	for step := int64(13); step <= 16; step++ {
		p.Observe(step, StepDecision{})
	}
	if tr := p.Observe(3, flagging(9, 9, 9)); tr != nil || p.Stats().Stale != 1 {
		t.Errorf("stale step 3: %+v, stats %+v", tr, p.Stats())
	}
	tr = p.Observe(17, StepDecision{}) // 13..17 clean
	if len(tr) != 1 || tr[0].State != VerdictResolved || tr[0].Verdict.ResolvedStep != 17 {
		t.Errorf("step 17: %+v, want the verdict resolved", tr)
	}
}

func TestStateIsBounded(t *testing.T) {
	p := NewPersistence(PersistenceOptions{MaxFlagsPerStep: 2, MaxTrackedRanks: 1})
	var opened []int
	for step := range int64(3) {
		for _, tr := range p.Observe(step, flagging(1, 2, 3, 4, 5)) {
			opened = append(opened, tr.Verdict.Rank)
		}
	}
	// Each step keeps the two highest scores (ranks 5 and 4); one verdict fits.
	if p.Stats().DroppedFlags != 9 || p.Stats().DroppedVerdicts != 1 || !slices.Equal(opened, []int{4}) {
		t.Errorf("opened %v, stats %+v; want rank 4 opened, 9 flags and 1 verdict dropped", opened, p.Stats())
	}
}

func TestVerdictKindIsTheMajority(t *testing.T) {
	p := NewPersistence(PersistenceOptions{})
	link := StepDecision{Flags: []Flag{{Rank: 2, Kind: KindLink, Score: 6, WaitRatio: 3.5, Link: "dp1"}}}
	p.Observe(1, link)
	p.Observe(2, flagging(2))
	tr := p.Observe(3, link)
	if len(tr) != 1 || tr[0].Verdict.Kind != KindLink || tr[0].Verdict.PeakRatio != 3.5 || tr[0].Verdict.Evidence.Link != "dp1" {
		t.Errorf("%+v, want a link verdict with the wait ratio as peak", tr)
	}
}

// --- Real production data: Alibaba cluster-trace-gpu-v2020 mini-batch times.

type alibabaStep struct {
	iteration int64
	samples   []RankSample
}

// loadAlibaba reads testdata/<name>: one step per sampled iteration, the
// normalised batch time of each worker as its compute time.
func loadAlibaba(t *testing.T, name string) []alibabaStep {
	t.Helper()
	f, err := os.Open("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var steps []alibabaStep
	for _, row := range rows[1:] { // ,worker,gpu,time,batch_time_norm
		worker, err1 := strconv.Atoi(row[1])
		iteration, err2 := strconv.ParseInt(row[3], 10, 64)
		batch, err3 := strconv.ParseFloat(row[4], 64)
		if err1 != nil || err2 != nil || err3 != nil {
			t.Fatalf("%s: row %v: %v %v %v", name, row, err1, err2, err3)
		}
		if len(steps) == 0 || steps[len(steps)-1].iteration != iteration {
			steps = append(steps, alibabaStep{iteration: iteration})
		}
		last := &steps[len(steps)-1]
		last.samples = append(last.samples, RankSample{Rank: worker, Compute: time.Duration(batch * float64(time.Millisecond))})
	}
	return steps
}

type replay struct {
	transitions []Transition
	flagged     map[int][]int64 // rank -> iterations that flagged it
}

func replayAlibaba(steps []alibabaStep, opts Options) replay {
	r := replay{flagged: map[int][]int64{}}
	p := NewPersistence(PersistenceOptions{})
	for _, s := range steps {
		d := DecideStep(s.samples, opts)
		for _, f := range d.Flags {
			r.flagged[f.Rank] = append(r.flagged[f.Rank], s.iteration)
		}
		r.transitions = append(r.transitions, p.Observe(s.iteration, d)...)
	}
	return r
}

// sampleIndex returns the position of iteration among the steps.
func sampleIndex(steps []alibabaStep, iteration int64) int {
	return slices.IndexFunc(steps, func(s alibabaStep) bool { return s.iteration == iteration })
}

func describe(tr []Transition) string {
	var s string
	for _, t := range tr {
		v := t.Verdict
		s += fmt.Sprintf("\n  %s rank %d %s: onset %d opened %d last flagged %d resolved %d (%d flags, peak %.2f× z %.1f)",
			t.State, v.Rank, v.Kind, v.OnsetStep, v.OpenedStep, v.LastFlaggedStep, v.ResolvedStep, v.FlaggedSteps, v.PeakRatio, v.PeakScore)
	}
	return s
}

// Job 1: worker 6 straggles around iterations 1811–1941 and recovers;
// workers 0–2 run 5–20% slow throughout (the trace's own description).
// The data flags worker 6 first at 1811 and last at 1941 (1.3–2.35× its
// peers' median); the tolerance is ±3 samples (30 iterations).
func TestAlibabaJob1Worker6EpisodeOpensAndResolves(t *testing.T) {
	steps := loadAlibaba(t, "job_1_norm.csv")
	r := replayAlibaba(steps, Options{})
	t.Logf("job 1, default options: flagged %v%s", r.flagged, describe(r.transitions))
	if len(r.transitions) != 2 || r.transitions[0].State != VerdictOpened || r.transitions[1].State != VerdictResolved {
		t.Fatalf("want exactly one episode (open, resolved), got%s", describe(r.transitions))
	}
	v := r.transitions[1].Verdict
	if v.Rank != 6 || v.Kind != KindCompute {
		t.Fatalf("episode for rank %d (%s), want worker 6, compute", v.Rank, v.Kind)
	}
	within := func(what string, got, want int64) {
		if d := sampleIndex(steps, got) - sampleIndex(steps, want); d < -3 || d > 3 || sampleIndex(steps, got) < 0 {
			t.Errorf("%s at iteration %d, want %d ± 3 samples", what, got, want)
		}
	}
	within("onset", v.OnsetStep, 1811)
	within("open", v.OpenedStep, 1811)
	within("end (last flagged)", v.LastFlaggedStep, 1941)
	// Resolution waits for N clean samples by design: 5 after the end.
	if got, want := sampleIndex(steps, v.ResolvedStep), sampleIndex(steps, v.LastFlaggedStep)+DefaultN; got != want {
		t.Errorf("resolved at sample %d (iteration %d), want %d: N clean samples after the last flag", got, v.ResolvedStep, want)
	}
	if v.PeakRatio < 2 {
		t.Errorf("peak ratio %.2f, want ≥ 2 (worker 6 reached 1000 against a median of 425)", v.PeakRatio)
	}
	for _, w := range []int{0, 1, 2} {
		if len(r.flagged[w]) >= DefaultK {
			t.Errorf("worker %d flagged at %v: mild constant slowness must not approach a verdict", w, r.flagged[w])
		}
	}
}

// Why the minimum excess is 25%, not 15%: the trace describes workers 0–2
// as 5–20% slow and healthy. Around iterations 751–781 they run 16–23%
// above seven workers that agree within ~1% (MAD ≈ 5 of 425), so their
// z-scores reach 5–13 and only the excess floor separates "heterogeneous"
// from "straggling". A floor inside the documented healthy band (15%, 20%)
// opens verdicts on them; 25% is the first round value above the band.
// This test pins that reasoning, so changing the default has to face it.
func TestAlibabaJob1MildSlownessOpensBelowTheDefaultExcess(t *testing.T) {
	steps := loadAlibaba(t, "job_1_norm.csv")
	for _, excess := range []float64{0.15, 0.20} {
		r := replayAlibaba(steps, Options{MinExcess: excess})
		t.Logf("job 1, min excess %.2f:%s", excess, describe(r.transitions))
		mild := 0
		for _, tr := range r.transitions {
			v := tr.Verdict
			if tr.State == VerdictOpened && v.Rank <= 2 {
				mild++
				if v.OnsetStep < 741 || v.OnsetStep > 781 {
					t.Errorf("excess %.2f: worker %d opened with onset %d, expected within 741–781", excess, v.Rank, v.OnsetStep)
				}
			}
		}
		if mild == 0 {
			t.Errorf("excess %.2f: expected workers 0–2 to open a verdict (the reason the default is 0.25)", excess)
		}
	}
}

// The documents' 2×-mean rule alone sees worker 6 only at its 2.35× peak
// (the straggler drags a 10-worker mean by ~6%), so it never persists.
func TestAlibabaJob1MeanFactorRuleMissesTheEpisode(t *testing.T) {
	r := replayAlibaba(loadAlibaba(t, "job_1_norm.csv"), Options{Rule: RuleMeanFactor})
	t.Logf("job 1, mean_factor: flagged %v%s", r.flagged, describe(r.transitions))
	if len(r.transitions) != 0 || len(r.flagged[6]) >= DefaultK {
		t.Errorf("mean_factor: flagged %v, transitions%s; want worker 6 flagged fewer than K times", r.flagged, describe(r.transitions))
	}
}

// Job 2 has no labelled episode: workers 0–2 run ~17% faster than the
// rest from iteration ~1250 on, and the last samples report 1–4 workers.
func TestAlibabaJob2OpensNothing(t *testing.T) {
	steps := loadAlibaba(t, "job_2_norm.csv")
	r := replayAlibaba(steps, Options{})
	t.Logf("job 2: %d samples, flagged %v%s", len(steps), r.flagged, describe(r.transitions))
	if len(r.transitions) != 0 {
		t.Errorf("job 2 opened verdicts:%s", describe(r.transitions))
	}
}

// --- Synthetic scenarios, seeded (set STRAGGLER_SEED to explore others).

func scenarioRNG(t *testing.T, fallback uint64) *rand.Rand {
	seed := fallback
	if s := os.Getenv("STRAGGLER_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("STRAGGLER_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("seed %d (STRAGGLER_SEED=%d reruns it)", seed, seed)
	return rand.New(rand.NewPCG(seed, 0x5eed))
}

// runSteps decides and persists steps 0..n-1 and returns the transitions
// and how many steps flagged anything.
func runSteps(n int, step func(int) []RankSample, opts Options) (trs []Transition, flaggedSteps int) {
	p := NewPersistence(PersistenceOptions{})
	for i := range n {
		d := DecideStep(step(i), opts)
		if len(d.Flags) > 0 {
			flaggedSteps++
		}
		trs = append(trs, p.Observe(int64(i), d)...)
	}
	return trs, flaggedSteps
}

// isolatedPicks picks count ranks per step at random, never a rank picked
// in the last `cooldown` steps, so no rank is picked in 3 of any 5 steps
// when cooldown ≥ 2: single-step events by construction.
type isolatedPicks struct {
	rng      *rand.Rand
	last     map[int]int
	cooldown int
}

func (p *isolatedPicks) pick(step, ranks, count int) []int {
	var out []int
	for len(out) < count {
		r := p.rng.IntN(ranks)
		if last, ok := p.last[r]; (ok && step-last <= p.cooldown) || slices.Contains(out, r) {
			continue
		}
		p.last[r] = step
		out = append(out, r)
	}
	return out
}

func TestHardNegativesOpenNoVerdict(t *testing.T) {
	const steps = 100
	for _, ranks := range []int{8, 64, 1024} {
		t.Run(fmt.Sprint(ranks), func(t *testing.T) {
			rng := scenarioRNG(t, uint64(ranks))
			healthy := func(int) []RankSample { return jittered(rng, ranks, 400*ms, 0.03) }
			checkpoints := func(i int) []RankSample {
				s := healthy(i)
				if i%10 == 9 { // every rank writes its shard
					for j := range s {
						s[j].Compute *= 3
					}
				}
				return s
			}
			hiccups := &isolatedPicks{rng: rng, last: map[int]int{}, cooldown: 2}
			dataLoader := func(i int) []RankSample {
				s := healthy(i)
				for _, r := range hiccups.pick(i, ranks, max(1, ranks/64)) {
					s[r].Compute = time.Duration(float64(s[r].Compute) * (1.5 + 2.5*rng.Float64()))
				}
				return s
			}
			longSequence := &isolatedPicks{rng: rng, last: map[int]int{}, cooldown: 2}
			previousSlowest := -1
			sequenceLength := func(i int) []RankSample {
				s := make([]RankSample, ranks)
				for j := range s { // token counts vary: up to 25% more work
					s[j] = RankSample{Rank: j, Compute: time.Duration(float64(400*ms) * (1 + 0.25*rng.Float64()))}
				}
				heavy := longSequence.pick(i, ranks, 1)[0] // one very long packed document
				s[heavy].Compute = time.Duration(float64(s[heavy].Compute) * 1.6)
				longest := slices.MaxFunc(s, func(a, b RankSample) int { return cmp.Compare(a.Compute, b.Compute) })
				slowest := longest.Rank
				if slowest == previousSlowest {
					t.Fatalf("step %d: rank %d slowest twice in a row", i, slowest)
				}
				previousSlowest = slowest
				return s
			}
			stageBase := []float64{1.0, 1.15, 1.15, 1.8} // embedding, middle, middle, loss
			stages := func(i int) []RankSample {
				s := healthy(i)
				for j := range s {
					stage := j * len(stageBase) / ranks
					s[j].Group = fmt.Sprint(stage)
					s[j].Compute = time.Duration(float64(s[j].Compute) * stageBase[stage])
				}
				return s
			}

			cases := []struct {
				name        string
				step        func(int) []RankSample
				mustFlagOne bool // the per-step decision flags, persistence must filter
			}{
				{"healthy jitter", healthy, false},
				{"checkpoint steps on all ranks", checkpoints, false},
				{"data-loader hiccups", dataLoader, true},
				{"sequence-length variance", sequenceLength, true},
				{"pipeline-stage imbalance", stages, false},
			}
			for _, c := range cases {
				trs, flaggedSteps := runSteps(steps, c.step, Options{})
				t.Logf("%s: %d of %d steps flagged a rank, %d transitions", c.name, flaggedSteps, steps, len(trs))
				if len(trs) != 0 {
					t.Errorf("%s: opened verdicts:%s", c.name, describe(trs))
				}
				if c.mustFlagOne && flaggedSteps == 0 {
					t.Errorf("%s: no step flagged anything, so persistence was not exercised", c.name)
				}
			}
			// The stage scenario is a negative only because of the groups.
			if ranks >= 8 {
				ungrouped := func(i int) []RankSample {
					s := stages(i)
					for j := range s {
						s[j].Group = ""
					}
					return s
				}
				if trs, _ := runSteps(10, ungrouped, Options{}); len(trs) == 0 {
					t.Error("stages without groups opened nothing: the scenario does not test grouping")
				}
			}
		})
	}
}

func TestComputeStragglerOpensWithinFiveSteps(t *testing.T) {
	const onset = 10
	for _, ranks := range []int{8, 64, 16384} {
		t.Run(fmt.Sprint(ranks), func(t *testing.T) {
			rng := scenarioRNG(t, uint64(ranks)+1)
			slow := rng.IntN(ranks)
			step := func(i int) []RankSample {
				s := jittered(rng, ranks, 400*ms, 0.03)
				for j := range s {
					s[j].Link = fmt.Sprint("dp", j/8)
					s[j].CollectiveWait = time.Duration(float64(60*ms) * (1 + 0.05*rng.NormFloat64()))
				}
				if i >= onset {
					s[slow].Compute = time.Duration(float64(s[slow].Compute) * 2.3)
					s[slow].CollectiveWait = 2 * ms // it arrives last and waits least
					for j := slow / 8 * 8; j < min(slow/8*8+8, ranks); j++ {
						if j != slow {
							s[j].CollectiveWait += 520 * ms // its communicator waits for it
						}
					}
				}
				return s
			}
			trs, _ := runSteps(onset+6, step, Options{})
			t.Logf("straggler rank %d:%s", slow, describe(trs))
			if len(trs) != 1 || trs[0].State != VerdictOpened {
				t.Fatalf("want one open verdict, got%s", describe(trs))
			}
			v := trs[0].Verdict
			if v.Rank != slow || v.Kind != KindCompute || v.OnsetStep != onset || v.OpenedStep-onset >= 5 {
				t.Errorf("verdict %+v, want rank %d, compute, onset %d, opened within 5 steps", v, slow, onset)
			}
			if v.Evidence.WaitRatio >= 1 || v.PeakRatio < 2 {
				t.Errorf("evidence %+v: want ≥ 2× compute and the least wait", v.Evidence)
			}
		})
	}
}

func TestSlowLinkOpensALinkVerdict(t *testing.T) {
	const ranks, onset = 64, 5
	rng := scenarioRNG(t, 4242)
	step := func(i int) []RankSample {
		s := jittered(rng, ranks, 400*ms, 0.03)
		for j := range s {
			s[j].Link = fmt.Sprint("dp", j/8)
			s[j].CollectiveWait = time.Duration(float64(60*ms) * (1 + 0.05*rng.NormFloat64()))
		}
		if i >= onset { // one link of dp3 degrades: its two endpoints transfer slowly
			s[26].CollectiveWait += 250 * ms
			s[27].CollectiveWait += 240 * ms
		}
		return s
	}
	trs, _ := runSteps(onset+6, step, Options{})
	t.Logf("slow link:%s", describe(trs))
	if len(trs) != 2 {
		t.Fatalf("want two open verdicts, got%s", describe(trs))
	}
	for i, want := range []int{26, 27} {
		v := trs[i].Verdict
		if v.Rank != want || v.Kind != KindLink || v.Evidence.Link != "dp3" || v.Evidence.LinkPeersFlagged != 1 || v.OpenedStep-onset >= 5 {
			t.Errorf("verdict %+v, want rank %d, link on dp3 with its peer, within 5 steps", v, want)
		}
		if r := v.Evidence.ComputeRatio; r < 0.9 || r > 1.1 {
			t.Errorf("rank %d compute ratio %.2f: a slow link leaves compute normal", want, r)
		}
	}
}
