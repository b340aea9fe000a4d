package analysis

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump/frdumptest"
)

func moeDumps(cfg frdumptest.MoEConfig) []RankDump {
	ds := frdumptest.MegatronMoE(cfg)
	out := make([]RankDump, len(ds))
	for r, d := range ds {
		out[r] = RankDump{Rank: r, Dump: d}
	}
	return out
}

func describe(fs []Finding) string {
	var b strings.Builder
	for _, f := range fs {
		fmt.Fprintf(&b, "%s %v %s\n", f.Kind, f.Ranks, f.Key())
	}
	return b.String()
}

// The Megatron MoE job: nothing on the healthy control, whose ranks
// dumped a few collectives apart.
func TestMoEHealthyNothing(t *testing.T) {
	for seed := range uint64(8) {
		rep := Analyze(moeDumps(frdumptest.MoEConfig{Scenario: frdumptest.MoEHealthy, Seed: seed}), Options{})
		assert.Empty(t, rep.Findings, "seed %d:\n%s", seed, describe(rep.Findings))
	}
}

// The dumps of the healthy control do diverge: the check above is not
// vacuous.
func TestMoEHealthyDumpsDiverge(t *testing.T) {
	al := alignDumps(moeDumps(frdumptest.MoEConfig{Scenario: frdumptest.MoEHealthy, Seed: 3}))
	diverged := 0
	for _, g := range groupProgress(al) {
		if g.diverged() {
			diverged++
		}
	}
	assert.Positive(t, diverged)
	// Without dump times no rank is seen running, and no dump shows a
	// stop (evidence.go): nothing is reported either.
	ds := moeDumps(frdumptest.MoEConfig{Scenario: frdumptest.MoEHealthy, Seed: 3})
	for _, d := range ds {
		d.Dump.DumpedAtNs = 0
	}
	assert.Empty(t, Analyze(ds, Options{}).Findings)
}

func TestMoEHangCulprits(t *testing.T) {
	for _, scenario := range []string{frdumptest.MoEGPUError, frdumptest.MoEGILHang} {
		for _, culprits := range [][]int{{4, 5}, {2, 6}, {9, 15}} {
			for seed := range uint64(3) {
				name := fmt.Sprintf("%s/%v/seed%d", scenario, culprits, seed)
				rep := Analyze(moeDumps(frdumptest.MoEConfig{Scenario: scenario, Culprits: culprits, Seed: seed}), Options{})
				require.NotEmpty(t, rep.Findings, name)
				assert.LessOrEqual(t, len(rep.Findings), 3, "%s:\n%s", name, describe(rep.Findings))
				var hangs []Finding
				for _, f := range rep.Findings {
					if f.Kind == KindHang {
						hangs = append(hangs, f)
					}
					assert.NotEqual(t, KindPGStatusDivergence, f.Kind, "%s: folded into the hang", name)
				}
				require.Len(t, hangs, 1, "%s:\n%s", name, describe(rep.Findings))
				h := hangs[0]
				assert.Equal(t, culprits, h.Ranks, name)
				for _, r := range culprits {
					assert.Contains(t, h.Evidence[rankKey(r, EvidenceStuckCollective)], "seq", name)
					assert.Contains(t, h.Evidence[rankKey(r, EvidencePythonStack)], "megatron/", name)
				}
			}
		}
	}
}

func TestMoEGPUErrorNamesExpertAllToAll(t *testing.T) {
	rep := Analyze(moeDumps(frdumptest.MoEConfig{Scenario: frdumptest.MoEGPUError}), Options{})
	require.Len(t, rep.Findings, 1, describe(rep.Findings))
	h := rep.Findings[0]
	assert.Equal(t, KindHang, h.Kind)
	assert.Equal(t, "EXPERT_MODEL_PARALLEL_GROUP", h.PGDesc)
	assert.Equal(t, "nccl:all_to_all", h.ProfilingName)
	name, _ := frdumptest.MoEGroupOf(4, "ep")
	assert.Equal(t, name, h.PGName)
	assert.Contains(t, h.Evidence[rankKey(4, EvidenceStuckCollective)], "entered by {0, 2, 6}")
	assert.Contains(t, h.Evidence["folded_findings"], "missing_ranks", "the per-group hangs are folded in")
	assert.True(t, strings.HasPrefix(h.Message, "Hang: ranks {4, 5} stopped"), h.Message)
	assert.Equal(t, "pg="+name+"/coll:"+fmt.Sprint(h.Seq)+"/hang", h.Key().String())
}

// A rank whose dump is older but which was still running is no culprit,
// even if it is behind in every group.
func TestCulpritNeedsAStoppedRank(t *testing.T) {
	ds := moeDumps(frdumptest.MoEConfig{Scenario: frdumptest.MoEGILHang})
	for _, d := range ds {
		d.Dump.DumpedAtNs = lastCreated(d.Dump) + 1_000_000
	}
	for _, f := range Analyze(ds, Options{}).Findings {
		assert.NotEqual(t, KindHang, f.Kind)
	}
	rep := Analyze(moeDumps(frdumptest.MoEConfig{Scenario: frdumptest.MoEGILHang}), Options{StallAfter: 1 << 62})
	for _, f := range rep.Findings {
		assert.NotEqual(t, KindHang, f.Kind, "StallAfter longer than any idle")
	}
}

func lastCreated(d *frdump.Dump) int64 {
	var n int64
	for i := range d.Entries {
		n = max(n, d.Entries[i].TimeCreatedNs)
	}
	return n
}

// Where the watchdog records states, a collective the peers started and
// none completed stays a missing_ranks finding even when the dumps were
// taken right away (every rank "running"): the dumps of a hang taken at
// once, before any watchdog timeout.
func TestRunningRanksKeptWhereStatesAreKnown(t *testing.T) {
	dumps := loadFixture(t, "dp4-hang2-v2.4", 4)
	for _, d := range dumps {
		d.Dump.DumpedAtNs = lastCreated(d.Dump) + 1_000_000_000
	}
	rep := Analyze(dumps, Options{})
	require.Equal(t, []Kind{KindMissingRanks, KindPGStatusDivergence}, kinds(rep.Findings))
	assert.Equal(t, []int{2}, rep.Findings[0].Ranks)

	// Taken 10 minutes on (the watchdog's timeout): rank 2 stopped, the
	// culprit of one hang finding that explains both.
	for _, d := range dumps {
		d.Dump.DumpedAtNs = lastCreated(d.Dump) + 600_000_000_000
	}
	rep = Analyze(dumps, Options{})
	require.Equal(t, []Kind{KindHang}, kinds(rep.Findings), describe(rep.Findings))
	h := rep.Findings[0]
	assert.Equal(t, []int{2}, h.Ranks)
	assert.Equal(t, int64(17), h.Seq)
	assert.Equal(t, "nccl:all_reduce", h.ProfilingName)
	assert.Equal(t, "pg=0/coll:17/missing_ranks, pg=0/coll:17/pg_status_divergence", h.Evidence["folded_findings"])
}

// The healthy MoE control with one entry seen started: the old per-group
// findings are back (states known), yet no hang (no rank stopped).
func TestMoEHealthyWithStatesNoHang(t *testing.T) {
	ds := moeDumps(frdumptest.MoEConfig{Scenario: frdumptest.MoEHealthy, Seed: 3})
	ds[0].Dump.Entries[0].State = frdump.StateCompleted
	rep := Analyze(ds, Options{})
	assert.NotEmpty(t, rep.Findings)
	for _, f := range rep.Findings {
		assert.NotEqual(t, KindHang, f.Kind)
	}
}

// Pipeline stages differ by the schedule in the groups that span them
// (here MODEL_PARALLEL_GROUP: with culprits in stage 1, stage 0 runs its
// forward microbatches on until it blocks, stage 1 blocks in the first):
// those groups name no culprit. The pipeline's point-to-point entries tell
// which ranks are in different stages; without them, stage 1 would look
// stopped behind stage 0.
func TestMoEScheduleDivergenceIsNotACulprit(t *testing.T) {
	ds := moeDumps(frdumptest.MoEConfig{Scenario: frdumptest.MoEGILHang, Culprits: []int{12, 13}})
	al := alignDumps(ds)
	mp, _ := frdumptest.MoEGroupOf(0, "mp")
	var found bool
	for _, g := range groupProgress(al) {
		if g.name == mp {
			found = true
			assert.True(t, g.diverged(), "stage 0 is a microbatch ahead")
			assert.True(t, g.crossStage(stagePairs(al)))
			assert.Less(t, g.last[8], g.last[0])
		}
	}
	require.True(t, found)
	rep := Analyze(ds, Options{})
	require.Len(t, rep.Findings, 1, describe(rep.Findings))
	assert.Equal(t, []int{12, 13}, rep.Findings[0].Ranks)

	for _, d := range ds { // no point-to-point entries: stages unknown
		kept := d.Dump.Entries[:0]
		for _, e := range d.Dump.Entries {
			if !e.IsP2P {
				kept = append(kept, e)
			}
		}
		d.Dump.Entries = kept
	}
	// Stage 1 looks stopped behind stage 0 in the model-parallel groups,
	// but its ranks other than the culprits entered expert all_to_alls
	// the culprits never did: they wait, and are no culprits.
	rep = Analyze(ds, Options{})
	require.NotEmpty(t, rep.Findings)
	h := rep.Headline()
	require.NotNil(t, h, describe(rep.Findings))
	assert.Equal(t, []int{12, 13}, h.Ranks, describe(rep.Findings))
}

func TestP2PLocalRanks(t *testing.T) {
	for name, want := range map[string][2]int{"nccl:send 0->1": {0, 1}, "nccl:recv 1<-0": {1, 0}, "nccl:send 3->12": {3, 12}} {
		a, b, ok := p2pLocalRanks(name)
		require.True(t, ok, name)
		assert.Equal(t, want, [2]int{a, b}, name)
	}
	for _, bad := range []string{"nccl:send", "nccl:all_reduce", "nccl:send x->1", "nccl:recv 1<-", "send -1->2", ""} {
		_, _, ok := p2pLocalRanks(bad)
		assert.False(t, ok, bad)
	}
}

// BenchmarkAnalyzeMoE16: the 16-rank MoE job's hang, 29 process groups.
func BenchmarkAnalyzeMoE16(b *testing.B) {
	dumps := moeDumps(frdumptest.MoEConfig{Scenario: frdumptest.MoEGILHang, Steps: 8})
	b.ReportAllocs()
	for b.Loop() {
		if rep := Analyze(dumps, Options{}); len(rep.Findings) != 1 {
			b.Fatalf("want the hang only, got %v", kinds(rep.Findings))
		}
	}
}

// A rank behind a collective its peers completed joined it: its dump is
// only older, even if its clock makes it look idle for minutes (a node
// clock off against the file system's).
func TestStaleDumpIsNoCulpritWhateverItsClock(t *testing.T) {
	dumps := synthJob{ranks: 4, colls: 30, straggler: -1, jitter: 0.03, seed: 5}.dumps()
	d := dumps[3].Dump
	d.Entries = d.Entries[:27]
	d.PGStatus["0"] = frdump.PGStatus{LastEnqueued: 27, LastStarted: 27, LastCompleted: 27}
	for _, rd := range dumps {
		rd.Dump.DumpedAtNs = lastCreated(rd.Dump) + 1_000_000
	}
	d.DumpedAtNs = lastCreated(d) + 120_000_000_000 // two minutes "idle"
	rep := Analyze(dumps, Options{})
	require.Equal(t, []Kind{KindPGStatusDivergence}, kinds(rep.Findings), describe(rep.Findings))
	assert.Equal(t, []int{3}, rep.Findings[0].Ranks)
}
