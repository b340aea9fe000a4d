package ras

import (
	"bytes"
	"fmt"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func counts(allReduce, broadcast uint64) map[string]uint64 {
	return map[string]uint64{"AllReduce": allReduce, "Broadcast": broadcast, "AllGather": 0}
}

func rank(r int, allReduce uint64) Rank {
	return Rank{Rank: r, Host: fmt.Sprintf("10.0.0.%d", r/8), PID: 1000 + r, CUDADev: r % 8, NVMLDev: r % 8,
		CollectiveCounts: counts(allReduce, 2)}
}

func TestFindingsFixture(t *testing.T) {
	st, err := decodeStatus(bytes.NewReader(readFixture(t)))
	require.NoError(t, err)

	findings := Findings(st, "job-7")
	require.Len(t, findings, 1)
	f := findings[0]
	assert.Equal(t, KindMissingRanks, f.Kind)
	assert.Equal(t, "job-7", f.Job)
	assert.Equal(t, "0xae94423cfbb2ef4a", f.Communicator)
	assert.Equal(t, "0xb7e7187447156001:0xb8242ed28a71381e", f.SecondaryHash)
	assert.Equal(t, 2, f.CommunicatorSize)
	assert.Equal(t, []RankRef{{Rank: 1, Host: "172.16.64.245", PID: 1524345, CUDADev: 1, NVMLDev: 1}}, f.Ranks)
	assert.Zero(t, f.MissingRanksUnknown)
	assert.Equal(t, "communicator 0xae94423cfbb2ef4a (size 2): 1 of 2 ranks missing from the RAS view: "+
		"rank 1 (host 172.16.64.245, pid 1524345, GPU 1) is unresponsive", f.Message)
	assert.Regexp(t, regexp.MustCompile(`^[0-9a-f]{16}$`), f.Sequence)
	assert.Equal(t, "job-7|0xae94423cfbb2ef4a:0xb7e7187447156001:0xb8242ed28a71381e|missing_ranks|1|"+f.Sequence, f.Key())
}

// Every node reports the same job-wide view, possibly listing ranks in another order: the keys must match.
func TestFindingsKeysSameOnEveryNode(t *testing.T) {
	nodeA := &Status{NCCLVersion: "2.29.1", Communicators: []Communicator{{
		Hash: "0x1", SecondaryHash: "0x2:0x3", Size: 4, RanksCount: 3, MissingRanksCount: 1,
		Ranks:        []Rank{rank(0, 10), rank(1, 10), rank(3, 9)},
		MissingRanks: []MissingRank{{Rank: 2, Host: "10.0.0.0", PID: 1002, Status: MissingRankStatus{Unresponsive: true}}},
	}}}
	nodeB := &Status{NCCLVersion: "2.29.1", Communicators: []Communicator{{
		Hash: "0x1", SecondaryHash: "0x2:0x3", Size: 4, RanksCount: 3, MissingRanksCount: 1,
		Ranks:        []Rank{rank(3, 9), rank(1, 10), rank(0, 10)},
		MissingRanks: []MissingRank{{Rank: 2, Host: "10.0.0.0", PID: 1002, Status: MissingRankStatus{Unresponsive: true}}},
	}}}
	keysA, keysB := keys(Findings(nodeA, "j")), keys(Findings(nodeB, "j"))
	assert.Len(t, keysA, 2) // rank 2 missing, rank 3 behind
	assert.Equal(t, keysA, keysB)
}

func TestFindingsKeyChangesWhenCountsMove(t *testing.T) {
	status := func(behindCount uint64) *Status {
		return &Status{NCCLVersion: "2.29.1", Communicators: []Communicator{{
			Hash: "0x1", Size: 2, RanksCount: 2, Ranks: []Rank{rank(0, behindCount+1), rank(1, behindCount)},
		}}}
	}
	stuck1, stuck2, later := Findings(status(100), "j"), Findings(status(100), "j"), Findings(status(500), "j")
	require.Len(t, stuck1, 1)
	require.Len(t, later, 1)
	assert.Equal(t, stuck1[0].Key(), stuck2[0].Key(), "a job stuck in the same place keeps its key")
	assert.NotEqual(t, stuck1[0].Key(), later[0].Key(), "a new occurrence gets a new key")
	assert.NotEqual(t, Findings(status(100), "other-job")[0].Key(), stuck1[0].Key())
}

func TestFindingsRankIssues(t *testing.T) {
	ranks := []Rank{rank(0, 10), rank(1, 10), rank(2, 10), rank(3, 9)}
	ranks[0].Status = RankStatus{InitState: ncclInProgress, AsyncError: ncclInProgress} // not errors
	ranks[1].Status = RankStatus{AsyncError: 6}
	ranks[2].Status = RankStatus{AbortFlag: true, DestroyFlag: true}
	ranks[3].Status = RankStatus{InitState: 2}
	ranks[3].NVMLDev = 7
	st := &Status{NCCLVersion: "2.29.1", Communicators: []Communicator{{Hash: "0xc", Size: 4, RanksCount: 4, Ranks: ranks}}}

	findings := Findings(st, "j")
	require.Len(t, findings, 4)
	byKind := map[Kind]Finding{}
	for _, f := range findings {
		require.Len(t, f.Ranks, 1)
		byKind[f.Kind] = f
	}
	assert.Equal(t, 2, byKind[KindAbort].Ranks[0].Rank)
	assert.Equal(t, "communicator 0xc (size 4): rank 2 (host 10.0.0.0, pid 1002, GPU 2) aborted the communicator: abort_flag set",
		byKind[KindAbort].Message)
	assert.Equal(t, 1, byKind[KindAsyncError].Ranks[0].Rank)
	assert.Contains(t, byKind[KindAsyncError].Message, "async_error 6 (remote process exited or there was a network error)")
	assert.Equal(t, 3, byKind[KindInitError].Ranks[0].Rank)
	assert.Contains(t, byKind[KindInitError].Message, "rank 3 (host 10.0.0.0, pid 1003, GPU 3 (NVML 7)) failed to initialize: init_state 2")
	assert.Equal(t, 3, byKind[KindRankBehind].Ranks[0].Rank)
	assert.Contains(t, byKind[KindRankBehind].Message, "is behind the others in collectives issued (unresponsive?): AllReduce 9 of 10")
	assert.NotContains(t, byKind[KindRankBehind].Message, "Broadcast", "ops where the rank is level are not evidence")
}

func TestFindingsHealthyCommunicator(t *testing.T) {
	st := &Status{NCCLVersion: "2.29.1", Communicators: []Communicator{{
		Hash: "0x1", Size: 3, RanksCount: 3, Ranks: []Rank{rank(0, 7), rank(1, 7), rank(2, 7)}, MissingRanks: []MissingRank{},
	}}}
	assert.Empty(t, Findings(st, "j"))
	assert.Nil(t, Findings(nil, "j"))
}

func TestFindingsGroupsManyRanks(t *testing.T) {
	var ranks []Rank
	for r := range 16 {
		ranks = append(ranks, rank(r, 100))
	}
	for r := 4; r < 16; r++ {
		ranks[r].CollectiveCounts["AllReduce"] = 99
	}
	st := &Status{NCCLVersion: "2.29.1", Communicators: []Communicator{{Hash: "0x1", Size: 16, RanksCount: 16, Ranks: ranks}}}

	findings := Findings(st, "j")
	require.Len(t, findings, 1)
	f := findings[0]
	assert.Equal(t, KindRankBehind, f.Kind)
	assert.Len(t, f.Ranks, 12)
	assert.Contains(t, f.Message, "12 ranks (4-15) are behind the others")
	assert.Contains(t, f.Message, "; and 2 more")
	assert.Contains(t, f.Key(), "|rank_behind|4-15|")
}

func TestFindingsMissingRanks(t *testing.T) {
	st := &Status{NCCLVersion: "2.29.1", RAS: Collection{TimeoutsCount: 2}, Communicators: []Communicator{{
		Hash: "0x9", Size: 6, RanksCount: 2, MissingRanksCount: 3,
		Ranks: []Rank{rank(0, 1), rank(1, 1)},
		MissingRanks: []MissingRank{
			{Rank: 4, Host: "unknown", PID: -1, CUDADev: 4, NVMLDev: 4, Status: MissingRankStatus{Unresponsive: true, ConsideredDead: true}},
			{Rank: 2, Host: "10.0.0.1", PID: 77, CUDADev: 2, NVMLDev: 2},
		},
	}}}
	findings := Findings(st, "j")
	require.Len(t, findings, 1)
	f := findings[0]
	assert.Equal(t, []int{2, 4}, refRanks(f.Ranks), "sorted by rank")
	assert.Equal(t, 2, f.MissingRanksUnknown, "size 6 - 2 reporting = 4 missing, 2 described")
	assert.Equal(t, "communicator 0x9 (size 6): 4 of 6 ranks missing from the RAS view: "+
		"rank 2 (host 10.0.0.1, pid 77, GPU 2) answered RAS but no longer reports this communicator (destroyed or aborted?); "+
		"rank 4 (host unknown, pid -1, GPU 4) is considered dead; 2 missing without details "+
		"(RAS had 2 timeouts gathering the data: it may be incomplete)", f.Message)
}

func TestFindingsManyMissingRanksAreSummarized(t *testing.T) {
	comm := Communicator{Hash: "0x9", Size: 64, RanksCount: 40, MissingRanksCount: 24}
	for r := 40; r < 64; r++ {
		comm.MissingRanks = append(comm.MissingRanks, MissingRank{Rank: r, Host: "10.0.0.5", PID: r, Status: MissingRankStatus{Unresponsive: true}})
	}
	findings := Findings(&Status{NCCLVersion: "x", Communicators: []Communicator{comm}}, "j")
	require.Len(t, findings, 1)
	assert.Len(t, findings[0].Ranks, 24)
	assert.Contains(t, findings[0].Message, "; and 14 more (ranks 50-63)")
	assert.Contains(t, findings[0].Key(), "|missing_ranks|40-63|")
}

func TestRepeated(t *testing.T) {
	a := Finding{Kind: KindRankBehind, Job: "j", Communicator: "0x1", Sequence: "s1", Ranks: []RankRef{{Rank: 3}}}
	b := Finding{Kind: KindRankBehind, Job: "j", Communicator: "0x1", Sequence: "s2", Ranks: []RankRef{{Rank: 3}}}
	c := Finding{Kind: KindMissingRanks, Job: "j", Communicator: "0x1", Sequence: "s1", Ranks: []RankRef{{Rank: 1}}}
	assert.Equal(t, []Finding{a}, Repeated([]Finding{a, c}, []Finding{a, b}))
	assert.Empty(t, Repeated(nil, []Finding{a}))
}

func TestRankList(t *testing.T) {
	assert.Equal(t, "", rankList(nil))
	assert.Equal(t, "5", rankList([]int{5}))
	assert.Equal(t, "0-3,5,7-8", rankList([]int{8, 0, 1, 2, 3, 5, 7, 2}))
}

func TestResultName(t *testing.T) {
	assert.Equal(t, "3 (internal error)", resultName(3))
	assert.Equal(t, "42", resultName(42))
	assert.True(t, isError(1))
	assert.False(t, isError(ncclSuccess))
	assert.False(t, isError(ncclInProgress))
}

func keys(findings []Finding) []string {
	out := make([]string, len(findings))
	for i, f := range findings {
		out[i] = f.Key()
	}
	return out
}
