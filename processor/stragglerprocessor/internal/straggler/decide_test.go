package straggler

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"
	"unsafe"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const ms = time.Millisecond

// ranksOf builds one group of ranks 0..len-1 with the given compute times.
func ranksOf(compute ...time.Duration) []RankSample {
	s := make([]RankSample, len(compute))
	for i, c := range compute {
		s[i] = RankSample{Rank: i, Compute: c}
	}
	return s
}

// jittered returns n ranks computing base·(1+N(0, sigma)).
func jittered(rng *rand.Rand, n int, base time.Duration, sigma float64) []RankSample {
	s := make([]RankSample, n)
	for i := range s {
		s[i] = RankSample{Rank: i, Compute: time.Duration(float64(base) * (1 + sigma*rng.NormFloat64()))}
	}
	return s
}

func flaggedRanks(d StepDecision) []int {
	var out []int
	for _, r := range d.Ranks {
		if r.Flagged {
			out = append(out, r.Rank)
		}
	}
	return out
}

func TestEqualRanksScoreZeroAndNeverFlag(t *testing.T) {
	d := DecideStep(ranksOf(100*ms, 100*ms, 100*ms), Options{})
	for _, r := range d.Ranks {
		if r.Score != 0 || r.Flagged {
			t.Errorf("rank %d: score %v flagged %v, want 0 and false (MAD 0 must not divide by zero)", r.Rank, r.Score, r.Flagged)
		}
	}
}

// A tight group (MAD 0) gives a 12% slower rank a huge z-score; only the
// minimum excess keeps it unflagged.
func TestMinExcessStopsTightGroupsFromFlaggingSmallOffsets(t *testing.T) {
	samples := ranksOf(100*ms, 100*ms, 100*ms, 112*ms)
	d := DecideStep(samples, Options{})
	if want := 0.6745 * 12 / 1; math.Abs(d.Ranks[3].Score-want) > 1e-9 { // MAD 0, floored at 1% of 100 ms
		t.Fatalf("score %v, want %v: well past the 3.5 threshold", d.Ranks[3].Score, want)
	}
	if d.Ranks[3].Flagged {
		t.Error("a rank 12% above its peers must not be flagged under the 25% minimum excess")
	}
	if got := flaggedRanks(DecideStep(samples, Options{MinExcess: 0.10})); !slices.Equal(got, []int{3}) {
		t.Errorf("with a 10%% minimum excess, flagged %v, want [3]", got)
	}
}

func TestTwoRanksHaveNoMajority(t *testing.T) {
	if got := flaggedRanks(DecideStep(ranksOf(100*ms, 500*ms), Options{Rule: RuleMeanFactor, Factor: 1.1})); got != nil {
		t.Errorf("flagged %v in a group of two", got)
	}
}

// With 8 ranks a 2.3× straggler drags the mean to 1.16, so the documents'
// 2×-mean rule misses it; the robust rule does not.
func TestMeanFactorMissesAStragglerAmongEightRobustFindsIt(t *testing.T) {
	samples := ranksOf(100*ms, 100*ms, 100*ms, 100*ms, 230*ms, 100*ms, 100*ms, 100*ms)
	if got := flaggedRanks(DecideStep(samples, Options{})); !slices.Equal(got, []int{4}) {
		t.Errorf("robust flagged %v, want [4]", got)
	}
	if got := flaggedRanks(DecideStep(samples, Options{Rule: RuleMeanFactor})); got != nil {
		t.Errorf("mean_factor flagged %v, want nothing (2.3 < 2×1.1625)", got)
	}
	if got := flaggedRanks(DecideStep(samples, Options{Rule: RuleBoth})); got != nil {
		t.Errorf("both flagged %v, want nothing", got)
	}
	many := make([]time.Duration, 64)
	for i := range many {
		many[i] = 100 * ms
	}
	many[17] = 230 * ms
	if got := flaggedRanks(DecideStep(ranksOf(many...), Options{Rule: RuleMeanFactor})); !slices.Equal(got, []int{17}) {
		t.Errorf("mean_factor among 64 flagged %v, want [17]", got)
	}
}

// Pipeline stages legitimately differ: compare within the stage only.
func TestGroupsAreComparedSeparately(t *testing.T) {
	var samples []RankSample
	for r := range 16 {
		stage, base := "0", 100*ms
		if r >= 12 {
			stage, base = "3", 190*ms // the last stage carries the loss
		}
		samples = append(samples, RankSample{Rank: r, Group: stage, Compute: base})
	}
	if got := flaggedRanks(DecideStep(samples, Options{})); got != nil {
		t.Errorf("flagged %v across uneven stages", got)
	}
	d := DecideStep(samples, Options{})
	if len(d.Groups) != 2 || d.Groups[0].Group != "0" || d.Groups[1].Median != 190*ms || d.Groups[1].Ranks != 4 {
		t.Errorf("groups = %+v", d.Groups)
	}
	samples[13].Compute = 450 * ms
	if got := flaggedRanks(DecideStep(samples, Options{})); !slices.Equal(got, []int{13}) {
		t.Errorf("flagged %v, want [13] (slow within its stage)", got)
	}
	for i := range samples {
		samples[i].Group = ""
	}
	samples[13].Compute = 190 * ms
	if got := flaggedRanks(DecideStep(samples, Options{})); len(got) != 4 {
		t.Errorf("without stages the last stage's ranks (%v) should be flagged: that is why groups exist", got)
	}
}

func TestSummaryMatchesSortedComputation(t *testing.T) {
	const seed = 7
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	samples := jittered(rng, 1000, 100*ms, 0.05)
	samples[321].Compute = 400 * ms
	values := make([]time.Duration, len(samples))
	var sum float64
	for i, s := range samples {
		values[i] = s.Compute
		sum += float64(s.Compute)
	}
	slices.Sort(values)
	got := DecideStep(samples, Options{}).Summary
	want := StepSummary{
		RanksReported: 1000, Mean: time.Duration(math.Round(sum / 1000)),
		Median: (values[499] + values[500]) / 2, P99: values[989], Max: 400 * ms, SlowestRank: 321,
	}
	if d := got.Median - want.Median; d < -1 || d > 1 {
		t.Errorf("median %v, want %v", got.Median, want.Median)
	}
	got.Median = want.Median
	if got != want {
		t.Errorf("summary %+v, want %+v", got, want)
	}
}

func TestSlowLinkIsToldFromSlowRank(t *testing.T) {
	// 16 ranks on four 4-rank communicators; everyone computes 100 ms and
	// waits 20 ms, except where a test changes it.
	base := func() []RankSample {
		s := make([]RankSample, 16)
		for i := range s {
			s[i] = RankSample{Rank: i, Compute: 100 * ms, CollectiveWait: 20 * ms, Link: "tp" + string(rune('0'+i/4))}
		}
		return s
	}

	slowLink := base()
	slowLink[5].CollectiveWait, slowLink[6].CollectiveWait = 70*ms, 75*ms // two members of tp1
	d := DecideStep(slowLink, Options{})
	if got := flaggedRanks(d); !slices.Equal(got, []int{5, 6}) {
		t.Fatalf("flagged %v, want [5 6]", got)
	}
	for _, f := range d.Flags {
		if f.Kind != KindLink || f.Link != "tp1" || f.LinkPeersFlagged != 1 || f.ComputeRatio != 1 || f.WaitRatio < 3 || f.Score < 3.5 {
			t.Errorf("flag %+v: want a link flag on tp1 with one peer, normal compute, wait ≥ 3× and score ≥ 3.5", f)
		}
	}
	if g := d.Groups[0]; g.LinkFlagged != 2 || g.ComputeFlagged != 0 || g.MedianWait != 20*ms {
		t.Errorf("group stats %+v, want 2 link flags and a 20 ms median wait", g)
	}
	if d.Ranks[5].Kind.String() != "link" {
		t.Errorf("kind string %q", d.Ranks[5].Kind)
	}

	// A compute straggler: its communicator peers wait for it (long waits,
	// normal compute) but that is not a link fault.
	slowRank := base()
	slowRank[9].Compute, slowRank[9].CollectiveWait = 230*ms, 2*ms
	for _, peer := range []int{8, 10, 11} {
		slowRank[peer].CollectiveWait = 150 * ms
	}
	d = DecideStep(slowRank, Options{})
	if got := flaggedRanks(d); !slices.Equal(got, []int{9}) {
		t.Fatalf("flagged %v, want only the straggler [9]", got)
	}
	if f := d.Flags[0]; f.Kind != KindCompute || f.WaitRatio >= 1 || f.ComputeRatio != 2.3 {
		t.Errorf("flag %+v: want compute, 2.3× compute and the least wait", f)
	}

	// Without communicator ids the group's straggler still explains waits.
	for i := range slowRank {
		slowRank[i].Link = ""
	}
	if got := flaggedRanks(DecideStep(slowRank, Options{})); !slices.Equal(got, []int{9}) {
		t.Errorf("without links flagged %v, want [9]", got)
	}
}

func TestBadDurationsGiveFiniteScores(t *testing.T) {
	samples := []RankSample{
		{Rank: 0, Compute: -5 * ms, CollectiveWait: -1},
		{Rank: 1, Compute: 0},
		{Rank: 2, Compute: math.MaxInt64, CollectiveWait: math.MaxInt64},
		{Rank: 3, Compute: math.MinInt64},
		{Rank: 4, Compute: math.MaxInt64 - 1},
	}
	d := DecideStep(samples, Options{})
	for _, r := range d.Ranks {
		if math.IsNaN(r.Score) || math.IsInf(r.Score, 0) {
			t.Errorf("rank %d: score %v", r.Rank, r.Score)
		}
	}
	if d.Summary.Max != math.MaxInt64 || d.Summary.SlowestRank != 2 || d.Summary.Mean < 0 {
		t.Errorf("summary %+v", d.Summary)
	}
	// A group whose median compute is 0 carries no timing signal.
	zeros := DecideStep(ranksOf(0, 0, 0, 5*ms), Options{})
	if zeros.Groups[0].CouldFlag || flaggedRanks(zeros) != nil {
		t.Errorf("zero-median group flagged: %+v", zeros.Groups[0])
	}
	if empty := DecideStep(nil, Options{}); len(empty.Ranks) != 0 || empty.Summary.SlowestRank != -1 {
		t.Errorf("empty step: %+v", empty)
	}
}

func sample16384() []RankSample {
	rng := rand.New(rand.NewPCG(16384, 1))
	s := jittered(rng, 16384, 350*ms, 0.03)
	for i := range s {
		s[i].Group = "stage" + string(rune('0'+i%4))
		s[i].CollectiveWait = time.Duration(float64(40*ms) * (1 + 0.05*rng.NormFloat64()))
		s[i].Link = "dp" + string(rune('a'+i%16))
	}
	s[1045].Compute = 805 * ms
	return s
}

// The scale target: ≤ ~200 bytes per rank for an open step, measured here
// as the bytes DecideStep allocates plus the samples it reads.
func TestMemoryPerRankAt16384(t *testing.T) {
	s := sample16384()
	DecideStep(s, Options{}) // warm up
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	d := DecideStep(s, Options{})
	runtime.ReadMemStats(&after)
	perRank := float64(after.TotalAlloc-before.TotalAlloc) / float64(len(s))
	input := float64(unsafe.Sizeof(RankSample{}))
	t.Logf("DecideStep allocates %.1f B/rank; a RankSample is %.0f B", perRank, input)
	if perRank+input > 200 {
		t.Errorf("%.1f B/rank allocated + %.0f B/rank of samples > 200", perRank, input)
	}
	if got := flaggedRanks(d); !slices.Equal(got, []int{1045}) {
		t.Errorf("flagged %v, want [1045]", got)
	}
}

func BenchmarkDecideStep16384(b *testing.B) {
	s := sample16384()
	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for b.Loop() {
		DecideStep(s, Options{})
	}
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(b.N)/float64(len(s)), "B/rank")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e6, "ms/step")
}

// FuzzDecideStep decodes ranks from bytes (8 + 8 bytes of durations, one
// byte each of group and link) and checks the invariants for any input.
func FuzzDecideStep(f *testing.F) {
	encode := func(samples []RankSample) []byte {
		var out []byte
		for _, s := range samples {
			out = binary.LittleEndian.AppendUint64(out, uint64(s.Compute))
			out = binary.LittleEndian.AppendUint64(out, uint64(s.CollectiveWait))
			out = append(out, byte(len(s.Group)), byte(len(s.Link)))
		}
		return out
	}
	// Seeds: an Alibaba job 1 step with worker 6 straggling (iteration 1861),
	// a slow link, and bad durations.
	alibaba := ranksOf(425, 444, 436, 467, 424, 414, 400, 1000, 427, 396)
	f.Add(encode(alibaba), uint8(0), 0.0, 0.0, 0.0)
	f.Add(encode([]RankSample{{Compute: 100, CollectiveWait: 20}, {Compute: 100, CollectiveWait: 90, Link: "x"}, {Compute: 100, CollectiveWait: 20}}), uint8(2), 2.0, 3.5, 0.25)
	f.Add(encode([]RankSample{{Compute: -1}, {Compute: math.MaxInt64}, {Compute: 0}, {Compute: math.MinInt64}}), uint8(1), -1.0, math.NaN(), math.Inf(1))
	f.Fuzz(func(t *testing.T, data []byte, rule uint8, factor, z, excess float64) {
		var samples []RankSample
		for i := 0; len(data) >= 18; i++ {
			samples = append(samples, RankSample{
				Rank:           i,
				Compute:        time.Duration(binary.LittleEndian.Uint64(data)),
				CollectiveWait: time.Duration(binary.LittleEndian.Uint64(data[8:])),
				Group:          string(rune('a' + data[16]%3)),
				Link:           string(rune('a' + data[17]%4)),
			})
			data = data[18:]
		}
		opts := Options{Rule: []Rule{"", RuleRobust, RuleMeanFactor, RuleBoth, "bogus"}[int(rule)%5], Factor: factor, ZThreshold: z, MinExcess: excess}
		d := DecideStep(samples, opts)
		if len(d.Ranks) != len(samples) {
			t.Fatalf("%d results for %d samples", len(d.Ranks), len(samples))
		}
		flagged := 0
		for i, r := range d.Ranks {
			if math.IsNaN(r.Score) || math.IsInf(r.Score, 0) {
				t.Fatalf("rank %d: score %v", i, r.Score)
			}
			if r.Flagged != (r.Kind != KindNone) {
				t.Fatalf("rank %d: flagged %v with kind %v", i, r.Flagged, r.Kind)
			}
			if r.Flagged {
				flagged++
			}
		}
		if flagged != len(d.Flags) {
			t.Fatalf("%d flagged ranks, %d flags", flagged, len(d.Flags))
		}
		for _, fl := range d.Flags {
			if math.IsNaN(fl.Score) || math.IsInf(fl.Score, 0) || math.IsNaN(fl.ComputeRatio) || math.IsNaN(fl.WaitRatio) {
				t.Fatalf("flag %+v has a non-finite number", fl)
			}
		}
		p := NewPersistence(PersistenceOptions{})
		for step := range int64(6) {
			p.Observe(step, d)
		}
		if flagged > 0 && len(p.Open()) != min(flagged, DefaultMaxFlagsPerStep) {
			t.Fatalf("%d ranks flagged in 6 steps, %d verdicts open", flagged, len(p.Open()))
		}
	})
}

// A rank whose wait is not comparable this step (NoWait) is left out of
// the wait statistics and is never a link straggler; a group where fewer
// than half the ranks have a comparable wait judges no link.
func TestNoWaitRanksAreLeftOutOfTheLinkTest(t *testing.T) {
	base := func() []RankSample {
		s := make([]RankSample, 16)
		for i := range s {
			s[i] = RankSample{Rank: i, Compute: 100 * ms, CollectiveWait: 20 * ms}
		}
		return s
	}
	s := base()
	for i := 0; i < 4; i++ {
		s[i].CollectiveWait, s[i].NoWait = 400*ms, true // measured another way
	}
	s[9].CollectiveWait = 90 * ms
	d := DecideStep(s, Options{})
	if got := flaggedRanks(d); !slices.Equal(got, []int{9}) {
		t.Fatalf("flagged %v, want [9]", got)
	}
	if g := d.Groups[0]; g.MedianWait != 20*ms {
		t.Errorf("median wait %v: the NoWait ranks' waits were counted", g.MedianWait)
	}

	few := base()
	for i := 0; i < 9; i++ {
		few[i].NoWait = true
	}
	few[12].CollectiveWait = 90 * ms
	if got := flaggedRanks(DecideStep(few, Options{})); len(got) != 0 {
		t.Errorf("flagged %v with 7 of 16 waits comparable, want none", got)
	}
}
