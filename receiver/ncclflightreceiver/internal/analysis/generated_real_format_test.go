package analysis

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump/frdumptest"
)

// The real incidents' answer on other incidents of their kind, generated in
// the real format (frdumptest.MegatronMoE with OnlyActive: pg_status keyed
// by each rank's own group ids, only the operations in flight, GIL-stuck
// ranks dumping no entries, a GPU-error culprit holding what its watchdog
// never saw complete, each rank dumping at its own moment): for every
// culprit set, seed and dump moment, one finding, the hang, naming exactly
// the culprits and the collective their peers wait in; nothing on the
// healthy control.

// moments are the dump moments the analysis may be given.
var moments = []string{
	"mtime",    // each rank's own (the files' mtimes where torch wrote them)
	"unknown",  // none
	"copy",     // the file times of a copy, a year later, all alike
	"estimate", // fr-analyze's default: the job's newest entry + timeout_ms
}

// atMoment returns the dumps with their moments set as moment says.
func atMoment(dumps []RankDump, moment string) []RankDump {
	out := make([]RankDump, len(dumps))
	newest := newestOf(dumps)
	for i, d := range dumps {
		c := *d.Dump
		switch moment {
		case "unknown":
			c.DumpedAtNs = 0
		case "copy":
			c.DumpedAtNs = time.Date(2026, 12, 5, 18, 47, 0, 0, time.UTC).UnixNano()
		case "estimate":
			c.DumpedAtNs = newest + 600_000*int64(time.Millisecond)
		}
		out[i] = RankDump{Rank: d.Rank, Dump: &c}
	}
	return out
}

// expertAllToAllSeq is the expert group's sequence number of the dispatch
// all_to_all of microbatch mb's forward in the step after 3 complete ones:
// a step has 4 forward and 4 backward layers of 3 expert all_to_alls each.
func expertAllToAllSeq(mb int) int64 { return 3*24 + int64(mb)*3 + 1 }

var generatedCulprits = [][]int{
	{9, 14},  // two stage-1 ranks of different tensor and expert groups
	{9, 13},  // one expert group, different tensor groups
	{4, 5},   // a tensor-parallel pair
	{2, 3},   // another
	{10},     // one rank
	{14, 15}, // a stage-1 tensor pair
	{12},     // the real GPU error's culprit's number
	{0, 7},   // stage 0, different tensor and expert groups
}

func TestGeneratedRealFormatIncidents(t *testing.T) {
	for _, scenario := range []string{frdumptest.MoEGILHang, frdumptest.MoEGPUError} {
		mb := 1 // the GIL holder stops in microbatch 1's router
		if scenario == frdumptest.MoEGPUError {
			mb = 2 // the failed GPU's CPU blocks before microbatch 2's all_to_all
		}
		for _, culprits := range generatedCulprits {
			for seed := range uint64(3) {
				dumps := moeDumps(frdumptest.MoEConfig{Scenario: scenario, Culprits: culprits, Seed: seed, OnlyActive: true})
				if scenario == frdumptest.MoEGILHang {
					for _, r := range culprits {
						require.Empty(t, dumps[r].Dump.Entries, "the GIL-stuck rank %d dumps no entries", r)
					}
				} else {
					for _, r := range culprits {
						require.NotEmpty(t, dumps[r].Dump.Entries, "the GPU-error culprit %d holds what its watchdog never saw complete", r)
					}
				}
				for _, moment := range moments {
					name := fmt.Sprintf("%s/%v/seed%d/%s", scenario, culprits, seed, moment)
					checkGeneratedHang(t, name, Analyze(atMoment(dumps, moment), Options{}), culprits, expertAllToAllSeq(mb))
				}
			}
		}
	}
}

// checkGeneratedHang asserts the one finding: the hang, naming the culprits
// and, as the job's stuck collective, the dispatch all_to_all of one of
// their expert groups that the culprits of that group never entered and
// its other members did.
func checkGeneratedHang(t *testing.T, name string, rep Report, culprits []int, seq int64) {
	t.Helper()
	require.Len(t, rep.Findings, 1, "%s:\n%s", name, describe(rep.Findings))
	h := rep.Headline()
	require.NotNil(t, h, name)
	require.Equal(t, KindHang, h.Kind, name)
	assert.Equal(t, culprits, h.Ranks, name)
	require.NotNil(t, h.Stuck, name)
	assert.Equal(t, "EXPERT_MODEL_PARALLEL_GROUP", h.PGDesc, name)
	assert.Equal(t, "nccl:all_to_all", h.ProfilingName, name)
	assert.Equal(t, seq, h.Seq, name)
	assert.Equal(t, frdumptest.MoEStuckSizes, h.Stuck.Sizes(), name)
	assert.Equal(t, "BFloat16", h.Stuck.Dtype(), name)
	var groups []string
	for _, r := range culprits {
		g, _ := frdumptest.MoEGroupOf(r, "ep")
		groups = append(groups, g)
	}
	require.Contains(t, groups, h.PGName, "%s: an expert group of a culprit", name)
	var missing, entered []int
	for r := range frdumptest.MoEWorld {
		if g, _ := frdumptest.MoEGroupOf(r, "ep"); g != h.PGName {
			continue
		}
		if slices.Contains(culprits, r) {
			missing = append(missing, r)
		} else {
			entered = append(entered, r)
		}
	}
	assert.Equal(t, missing, h.Stuck.Missing, name)
	assert.Equal(t, entered, h.Stuck.Entered, name)
	want := fmt.Sprintf("pg %s:EXPERT_MODEL_PARALLEL_GROUP seq %d nccl:all_to_all %s BFloat16", h.PGName, seq, frdumptest.MoEStuckSizes)
	assert.Contains(t, h.Message, want, name)
	for _, r := range culprits {
		assert.Contains(t, h.Evidence[rankKey(r, EvidenceStuckCollective)], "nccl:all_to_all "+frdumptest.MoEStuckSizes+" BFloat16", "%s rank %d", name, r)
	}
	for _, f := range h.Folded {
		assert.Contains(t, []Kind{KindMissingRanks, KindPGStatusDivergence}, f.Kind, name)
	}
}

// The healthy control, dumped on demand, each rank at its own moment a few
// collectives apart: nothing, whatever moment the analysis is given. 32
// seeds: in some (14, 30) no dump of a pipeline pair holds a point-to-point
// operation, and the model-parallel group spanning it is known to cross
// stages only through the other pipeline groups (stagePairs).
func TestGeneratedRealFormatHealthy(t *testing.T) {
	diverged := 0
	for seed := range uint64(32) {
		dumps := moeDumps(frdumptest.MoEConfig{Scenario: frdumptest.MoEHealthy, Seed: seed, OnlyActive: true})
		for _, g := range groupProgress(alignDumps(dumps)) {
			if g.diverged() {
				diverged++
			}
		}
		for _, moment := range moments {
			rep := Analyze(atMoment(dumps, moment), Options{})
			assert.Empty(t, rep.Findings, "seed %d %s:\n%s", seed, moment, describe(rep.Findings))
		}
	}
	assert.Positive(t, diverged, "the dumps do diverge: the control is not vacuous")
}
