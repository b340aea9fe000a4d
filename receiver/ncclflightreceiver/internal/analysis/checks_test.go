package analysis

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"
)

func healthyJob(seed uint64) []RankDump {
	return synthJob{ranks: 4, colls: 20, straggler: -1, jitter: 0.03, seed: seed}.dumps()
}

// entry returns rank r's entry for collective seq of the synthetic job.
func entry(t *testing.T, dumps []RankDump, r int, seq int64) *frdump.Entry {
	t.Helper()
	for i := range dumps[r].Dump.Entries {
		if e := &dumps[r].Dump.Entries[i]; e.CollectiveSeqID == seq {
			return e
		}
	}
	t.Fatalf("rank %d has no collective %d", r, seq)
	return nil
}

func TestMismatchDtype(t *testing.T) {
	dumps := healthyJob(10)
	entry(t, dumps, 2, 7).InputDtypes = []string{"Float"}
	entry(t, dumps, 2, 7).OutputDtypes = []string{"Float"}

	rep := Analyze(dumps, Options{})
	require.Equal(t, []Kind{KindMismatch}, kinds(rep.Findings))
	f := rep.Findings[0]
	assert.Equal(t, int64(7), f.Seq)
	assert.Equal(t, []int{2}, f.Ranks)
	assert.Equal(t, "nccl:all_reduce", f.ProfilingName)
	assert.Equal(t, "input_dtypes,output_dtypes", f.Evidence["mismatched_fields"])
	assert.Equal(t, "['BFloat16']", f.Evidence["expected.input_dtypes"])
	assert.Equal(t, "['Float']", f.Evidence[rankKey(2, "input_dtypes")])
	assert.Equal(t, "Collective sequence number: 7 has mismatched input dtypes, output dtypes across ranks\n"+
		"group info: 0:default_pg\n"+
		"collective: nccl:all_reduce\n"+
		"culprit ranks: {2}\n"+
		"input dtypes: ranks {0, 1, 3}: ['BFloat16']; rank 2: ['Float']\n"+
		"output dtypes: ranks {0, 1, 3}: ['BFloat16']; rank 2: ['Float']", f.Message)
	assert.Equal(t, FindingKey{PGName: "0", Seq: 7, Kind: KindMismatch}, f.Key())
}

func TestMismatchSizeAndType(t *testing.T) {
	dumps := healthyJob(11)
	entry(t, dumps, 1, 4).InputSizes = [][]int64{{1024}}
	entry(t, dumps, 3, 9).ProfilingName = "nccl:broadcast"

	rep := Analyze(dumps, Options{})
	require.Equal(t, []Kind{KindMismatch, KindMismatch}, kinds(rep.Findings))
	size, typ := rep.Findings[0], rep.Findings[1]
	assert.Equal(t, int64(4), size.Seq)
	assert.Equal(t, []int{1}, size.Ranks)
	assert.Equal(t, "input_sizes", size.Evidence["mismatched_fields"])
	assert.Equal(t, "[[1024]]", size.Evidence[rankKey(1, "input_sizes")])
	assert.Equal(t, int64(9), typ.Seq)
	assert.Equal(t, []int{3}, typ.Ranks)
	assert.Equal(t, "nccl:all_reduce", typ.ProfilingName, "the majority's collective")
	assert.Equal(t, "nccl:broadcast", typ.Evidence[rankKey(3, "profiling_name")])
}

func TestMismatchUnevenCollectivesAllowed(t *testing.T) {
	dumps := healthyJob(12)
	for r := range dumps {
		e := entry(t, dumps, r, 5)
		e.ProfilingName = "nccl:all_to_all"
		e.InputSizes = [][]int64{{int64(100 * (r + 1))}}
		g := entry(t, dumps, r, 6)
		g.ProfilingName = "nccl:gather"
		if r != 0 { // only the root holds the gathered output
			g.OutputSizes, g.OutputDtypes = nil, nil
		}
	}
	assert.Empty(t, Analyze(dumps, Options{}).Findings)
}

func TestMismatchTieGoesToLowestRank(t *testing.T) {
	dumps := healthyJob(13)[:2]
	entry(t, dumps, 1, 3).InputDtypes = []string{"Float"}
	rep := Analyze(dumps, Options{})
	require.Len(t, rep.Findings, 1)
	assert.Equal(t, []int{1}, rep.Findings[0].Ranks)
}

func TestTimeout(t *testing.T) {
	dumps := healthyJob(14)
	for _, r := range []int{0, 1, 3} {
		e := entry(t, dumps, r, 20)
		e.State, e.Retired, e.HasDuration, e.TimeDiscoveredCompletedNs = frdump.StateStarted, true, false, 0
	}
	// Rank 2 never enqueued collective 20.
	dumps[2].Dump.Entries = dumps[2].Dump.Entries[:19]
	dumps[2].Dump.PGStatus["0"] = frdump.PGStatus{LastEnqueued: 19, LastStarted: 19, LastCompleted: 19}

	rep := Analyze(dumps, Options{})
	require.Equal(t, []Kind{KindMissingRanks, KindPGStatusDivergence, KindTimeout}, kinds(rep.Findings))
	to := rep.Findings[2]
	assert.Equal(t, int64(20), to.Seq)
	assert.Equal(t, []int{0, 1, 3}, to.Ranks)
	assert.Equal(t, "Collective sequence number: 20 timed out on ranks {0, 1, 3}\n"+
		"internal record id: 19\n"+
		"group info: 0:default_pg\n"+
		"collective: nccl:all_reduce\n"+
		"collective state: started\n"+
		"timeout: 600000 ms", to.Message)
	assert.Equal(t, "600000", to.Evidence[rankKey(1, "timeout_ms")])
	assert.Equal(t, []int{2}, rep.Findings[0].Ranks)
}

func TestTimeoutP2P(t *testing.T) {
	dumps := healthyJob(15)
	send := frdump.Entry{RecordID: 20, PGName: "0", PGDesc: "default_pg", CollectiveSeqID: 20, P2PSeqID: 3,
		ProfilingName: "nccl:send 1->2", IsP2P: true, State: frdump.StateScheduled, Retired: true, TimeoutMs: 1000}
	dumps[1].Dump.Entries = append(dumps[1].Dump.Entries, send)
	recv := send
	recv.ProfilingName = "nccl:recv 2<-1"
	dumps[2].Dump.Entries = append(dumps[2].Dump.Entries, recv)

	rep := Analyze(dumps, Options{})
	require.Equal(t, []Kind{KindTimeout}, kinds(rep.Findings))
	f := rep.Findings[0]
	assert.True(t, f.P2P)
	assert.Equal(t, int64(3), f.Seq)
	assert.Equal(t, []int{1, 2}, f.Ranks)
	assert.Empty(t, f.ProfilingName, "two different operations")
	assert.Contains(t, f.Message, "Point-to-point operation, p2p sequence number: 3 timed out on ranks {1, 2}")
	assert.Contains(t, f.Message, "collective: rank 1: nccl:send 1->2; rank 2: nccl:recv 2<-1")
	assert.Equal(t, "pg=0/p2p:3/timeout", f.Key().String())
}

func TestStatusDivergenceMinGap(t *testing.T) {
	dumps := healthyJob(16)
	dumps[0].Dump.PGStatus["0"] = frdump.PGStatus{LastEnqueued: 18, LastStarted: 18, LastCompleted: 18}
	assert.Empty(t, Analyze(dumps, Options{MinStatusGap: 3}).Findings, "a gap of 2 is under 3")
	rep := Analyze(dumps, Options{})
	require.Equal(t, []Kind{KindPGStatusDivergence}, kinds(rep.Findings))
	assert.Equal(t, []int{0}, rep.Findings[0].Ranks)
	assert.Equal(t, int64(19), rep.Findings[0].Seq)
}

func TestStatusDivergenceUnknownGroup(t *testing.T) {
	// Status for a group with no entries: named from pg_config, or by its key.
	// Rank 0's watchdog recorded a completion (in a group of its own):
	// without a state seen and without dump moments, status divergence is
	// no evidence (evidence.go) and would not be reported.
	a := &frdump.Dump{PGStatus: map[string]frdump.PGStatus{"7": {LastEnqueued: 4}},
		PGConfig: map[string]frdump.PGConfig{"7": {Name: "7", Desc: "pp"}},
		Entries:  []frdump.Entry{{PGID: 9, PGName: "9", CollectiveSeqID: 1, ProfilingName: "nccl:all_reduce", State: frdump.StateCompleted}}}
	b := &frdump.Dump{PGStatus: map[string]frdump.PGStatus{"7": {LastEnqueued: 2}, "x": {LastEnqueued: 1}}}
	c := &frdump.Dump{PGStatus: map[string]frdump.PGStatus{"x": {LastEnqueued: 3}}}
	rep := Analyze([]RankDump{{Rank: 0, Dump: a}, {Rank: 1, Dump: b}, {Rank: 2, Dump: c}}, Options{})
	require.Len(t, rep.Findings, 2)
	assert.Equal(t, "7", rep.Findings[0].PGName)
	assert.Equal(t, "pp", rep.Findings[0].PGDesc)
	assert.Equal(t, int64(7), rep.Findings[0].PGID)
	assert.Equal(t, []int{1}, rep.Findings[0].Ranks)
	assert.Equal(t, "x", rep.Findings[1].PGName)
	assert.Equal(t, int64(-1), rep.Findings[1].PGID)
	assert.NotContains(t, rep.Findings[1].Message, "first collective not enqueued", "no entry says what it was")
}
