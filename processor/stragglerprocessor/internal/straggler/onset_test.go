package straggler

import (
	"testing"
	"time"
)

// Issue 30: a verdict's onset is the straggler's own start of its first
// flagged step on its node's clock, not the step's earliest start (another
// node's clock when the job's node clocks disagree).
func TestOnsetIsTheRanksOwnStart(t *testing.T) {
	const (
		onset   = 20
		skew    = 90 * time.Second
		perNode = 4
	)
	rng := scenarioRNG(t, 30)
	stepStart := func(i int) int64 { return int64(1e18) + int64(i)*int64(time.Second) }
	step := func(i int) []RankSample {
		s := stages(rng, []float64{1, 1}, 8, 400*ms, 0.03, true)
		for k := range s {
			s[k].StartUnixNano = stepStart(i)
			if k/perNode == 0 {
				s[k].StartUnixNano -= int64(skew) // node 0's clock runs 90 s behind
			}
		}
		if i >= onset {
			s[9].Compute *= 2 // on node 2, whose clock is right
		}
		return s
	}
	j := NewJob(JobOptions{})
	var opened []Verdict
	for i := range 30 {
		samples := step(i)
		d := j.Decide(int64(i), samples, samples[0].StartUnixNano) // the earliest start: node 0's
		for _, tr := range d.Transitions {
			if tr.State == VerdictOpened {
				opened = append(opened, tr.Verdict)
			}
		}
	}
	if len(opened) != 1 || opened[0].Rank != 9 || opened[0].OnsetStep != onset {
		t.Fatalf("opened %+v; want rank 9 with onset step %d", opened, onset)
	}
	if got, want := opened[0].OnsetUnixNano, stepStart(onset); got != want {
		t.Errorf("onset %d, want rank 9's own start %d (%v off)", got, want, time.Duration(got-want))
	}
}

func TestOnsetFallsBackToTheStepStart(t *testing.T) {
	p := NewPersistence(PersistenceOptions{})
	var opened []Verdict
	for step := int64(1); step <= 3; step++ {
		d := flagging(4, 7)
		d.StartUnixNano = step * 1000
		d.Flags[1].StartUnixNano = step*1000 + 5 // rank 7's own start is known
		for _, tr := range p.Observe(step, d) {
			opened = append(opened, tr.Verdict)
		}
	}
	if len(opened) != 2 {
		t.Fatalf("opened %+v, want ranks 4 and 7", opened)
	}
	if opened[0].Rank != 4 || opened[0].OnsetUnixNano != 1000 {
		t.Errorf("rank 4 (own start unknown): %+v, want the step's start 1000", opened[0])
	}
	if opened[1].Rank != 7 || opened[1].OnsetUnixNano != 1005 {
		t.Errorf("rank 7: %+v, want its own start 1005", opened[1])
	}
}

func TestStampOwnStarts(t *testing.T) {
	samples := []RankSample{{Rank: 3, StartUnixNano: 30}, {Rank: 1, StartUnixNano: 10}, {Rank: 8, StartUnixNano: 80}}
	flags := []Flag{{Rank: 3}, {Rank: 8}}
	stampOwnStarts(flags, samples)
	if flags[0].StartUnixNano != 30 || flags[1].StartUnixNano != 80 {
		t.Errorf("flags %+v, want the starts of ranks 3 and 8", flags)
	}
	// Out of sample order: the flag that cannot be matched keeps 0.
	flags = []Flag{{Rank: 8}, {Rank: 3}}
	stampOwnStarts(flags, samples)
	if flags[0].StartUnixNano != 80 || flags[1].StartUnixNano != 0 {
		t.Errorf("flags %+v, want rank 8 stamped and rank 3 left at 0", flags)
	}
	stampOwnStarts(nil, samples) // no flags, no panic
}
