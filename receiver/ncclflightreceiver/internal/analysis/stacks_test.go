package analysis

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"
)

// The stuck ranks' Python stacks (issue 22): a missing_ranks finding quotes
// where each missing rank is instead and where each present rank waits; a
// timeout quotes the stack that enqueued the operation.

func frames(fn string) []frdump.Frame {
	return []frdump.Frame{{Name: fn, Filename: "train.py", Line: 42}, {Name: "<module>", Filename: "train.py", Line: 7}}
}

func TestFixtureHangQuotesStacks(t *testing.T) {
	rep := Analyze(loadFixture(t, "dp4-hang2-v2.4", 4), Options{})
	require.Equal(t, []Kind{KindMissingRanks, KindPGStatusDivergence}, kinds(rep.Findings))
	ev := rep.Findings[0].Evidence
	for r := range 4 {
		assert.NotEmpty(t, ev[rankKey(r, EvidencePythonStack)], "rank %d: the v2.4 pickles hold frames", r)
	}
}

func TestMissingRanksStacks(t *testing.T) {
	dumps := healthyJob(16)
	for r := range dumps {
		for i := range dumps[r].Dump.Entries {
			dumps[r].Dump.Entries[i].Frames = frames("step_" + strconv.Itoa(r))
		}
	}
	// Collective 20 is entered by ranks 0, 1, 3 and never completes; rank 2
	// stopped after 19.
	for _, r := range []int{0, 1, 3} {
		e := entry(t, dumps, r, 20)
		e.State, e.HasDuration, e.TimeDiscoveredCompletedNs = frdump.StateStarted, false, 0
		e.Frames = frames("all_reduce_grads")
	}
	dumps[2].Dump.Entries = dumps[2].Dump.Entries[:19]
	dumps[2].Dump.Entries[18].Frames = frames("load_batch")

	rep := Analyze(dumps, Options{})
	require.NotEmpty(t, rep.Findings)
	f := rep.Findings[0]
	require.Equal(t, KindMissingRanks, f.Kind)
	assert.Equal(t, "load_batch (train.py:42); <module> (train.py:7)", f.Evidence[rankKey(2, EvidencePythonStack)],
		"the missing rank's newest stack: where it is instead")
	for _, r := range []int{0, 1, 3} {
		assert.Equal(t, "all_reduce_grads (train.py:42); <module> (train.py:7)", f.Evidence[rankKey(r, EvidencePythonStack)],
			"rank %d: the stack that enqueued the collective it waits in", r)
	}
}

func TestMissingRanksStacksBounded(t *testing.T) {
	dumps := synthJob{ranks: 20, colls: 20, straggler: -1, jitter: 0.03, seed: 17}.dumps()
	for r := range dumps {
		for i := range dumps[r].Dump.Entries {
			dumps[r].Dump.Entries[i].Frames = frames("f")
		}
		if r >= 10 {
			dumps[r].Dump.Entries = dumps[r].Dump.Entries[:19] // ten ranks missing
		} else {
			entry(t, dumps, r, 20).State = frdump.StateStarted
		}
	}
	rep := Analyze(dumps, Options{})
	require.NotEmpty(t, rep.Findings)
	f := rep.Findings[0]
	require.Equal(t, KindMissingRanks, f.Kind)
	n := 0
	for r := range 20 {
		if _, ok := f.Evidence[rankKey(r, EvidencePythonStack)]; ok {
			n++
			assert.GreaterOrEqual(t, r, 10, "missing ranks are quoted first")
		}
	}
	assert.Equal(t, maxStackRanks, n)
}

func TestTimeoutStacks(t *testing.T) {
	dumps := healthyJob(18)
	for _, r := range []int{0, 1} {
		e := entry(t, dumps, r, 20)
		e.State, e.Retired, e.HasDuration, e.TimeDiscoveredCompletedNs = frdump.StateStarted, true, false, 0
		e.Frames = frames("all_reduce_grads")
	}
	rep := Analyze(dumps, Options{})
	var to *Finding
	for i := range rep.Findings {
		if rep.Findings[i].Kind == KindTimeout {
			to = &rep.Findings[i]
		}
	}
	require.NotNil(t, to)
	assert.Equal(t, "all_reduce_grads (train.py:42); <module> (train.py:7)", to.Evidence[rankKey(0, EvidencePythonStack)])
	assert.Equal(t, "all_reduce_grads (train.py:42); <module> (train.py:7)", to.Evidence[rankKey(1, EvidencePythonStack)])
}
