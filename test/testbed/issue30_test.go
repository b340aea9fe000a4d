package testbed

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The scenarios of issue 30 are committed with their expected outcomes.
func TestIssue30ScenariosLoad(t *testing.T) {
	for name, negative := range map[string]bool{"slow_from_start_no_labels": false, "pipeline_stages_no_labels": true,
		"two_rank_stage_slow_from_start": false, "two_rank_job": false, "noisy_rank_at_stage_boundary": false,
		"half_slow_fast_spikes": true} {
		sc := committed(t, name)
		assert.Equal(t, negative, sc.HardNegative, name)
		if !negative {
			require.Len(t, sc.Expect, 1, name)
			assert.Equal(t, "straggler.compute", string(sc.Expect[0].Type), name)
		}
	}
	// the slow rank and its control are the same pipeline
	assert.Equal(t, committed(t, "slow_from_start_no_labels").Noise, committed(t, "pipeline_stages_no_labels").Noise)
}

// A noisy rank varies step to step around its stage's level; the others
// keep theirs.
func TestNoisyRanks(t *testing.T) {
	sc := committed(t, "noisy_rank_at_stage_boundary")
	j := newJob(sc, "1", 5)
	var noisy, quiet []float64
	for step := range 30 {
		ranks := j.simulateStep(step)
		noisy = append(noisy, math.Log(float64(ranks[31].compute())/float64(ranks[30].compute())))
		quiet = append(quiet, math.Log(float64(ranks[29].compute())/float64(ranks[30].compute())))
		assert.InDelta(t, 1.45, float64(ranks[40].compute())/float64(ranks[30].compute()), 0.15, "step %d: the second stage", step)
	}
	sd := func(xs []float64) float64 {
		var m, v float64
		for _, x := range xs {
			m += x / float64(len(xs))
		}
		for _, x := range xs {
			v += (x - m) * (x - m) / float64(len(xs)-1)
		}
		return math.Sqrt(v)
	}
	assert.InDelta(t, 0.15, sd(noisy), 0.07, "rank 31 is noisy")
	assert.Less(t, sd(quiet), 0.05, "rank 29 is not")
}

// Spiking ranks compute spike_factor slower inside the window only.
func TestSpikeRanks(t *testing.T) {
	sc := committed(t, "half_slow_fast_spikes")
	j := newJob(sc, "1", 5)
	for _, step := range []int{13, 14, 19, 20} {
		ranks := j.simulateStep(step)
		in := step >= 14 && step < 20
		for _, r := range []int{10, 44} {
			want := 1.0
			if in {
				want = 1.8
			}
			assert.InDelta(t, want, float64(ranks[r].compute())/float64(ranks[12].compute()), 0.2, "rank %d step %d", r, step)
		}
		// still faster than the slow half
		assert.Less(t, ranks[10].compute(), ranks[11].compute(), "step %d", step)
	}
}

func TestIssue30ScenariosInvalid(t *testing.T) {
	for name, noise := range map[string]string{
		"noisy_sigma":      "{noisy_ranks: [1]}",
		"noisy_sigma only": "{noisy_sigma: 0.2}",
		"noisy_ranks":      "{noisy_ranks: [8], noisy_sigma: 0.2}",
		"spike_steps":      "{spike_ranks: [1], spike_at_step: 8, spike_steps: 5, spike_factor: 2}",
		"spike_factor":     "{spike_ranks: [1], spike_at_step: 1, spike_steps: 2}",
		"spike_ranks":      "{spike_ranks: [-1], spike_at_step: 1, spike_steps: 2, spike_factor: 2}",
		"spike only":       "{spike_steps: 2}",
	} {
		doc := "defaults: {nodes: 1, gpus_per_node: 8, steps: 10}\nscenarios: [{name: a, hard_negative: true, noise: " + noise + "}]"
		_, err := parseScenarios([]byte(doc))
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), `scenario 0 ("a")`, name)
		assert.Contains(t, err.Error(), "noise.", name)
	}
}

// At 1,024 ranks the issue-30 scenarios run on step spans alone.
func TestIssue30ScenariosAtScale(t *testing.T) {
	all, err := Scenarios()
	require.NoError(t, err)
	selected, err := selectScenarios(all, Options{Ranks: 1024})
	require.NoError(t, err)
	names := map[string]bool{}
	for _, sc := range selected {
		names[sc.Name] = true
		want := 1024
		if sc.Name == "two_rank_job" {
			want = 2 // keep_size
		}
		assert.Equal(t, want, sc.Ranks(), sc.Name)
	}
	for _, name := range []string{"slow_from_start_no_labels", "pipeline_stages_no_labels", "two_rank_stage_slow_from_start",
		"two_rank_job", "noisy_rank_at_stage_boundary", "half_slow_fast_spikes"} {
		assert.True(t, names[name], name)
	}
}
