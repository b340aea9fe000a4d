package analysis

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"
)

// hangLast makes the newest collective hang: rank missing never enqueued it,
// the others started it and wait.
func hangLast(dumps []RankDump, missing int) {
	for r := range dumps {
		d := dumps[r].Dump
		if r == missing {
			d.Entries = d.Entries[:len(d.Entries)-1]
			continue
		}
		last := &d.Entries[len(d.Entries)-1]
		last.State, last.Retired, last.HasDuration, last.TimeDiscoveredCompletedNs = frdump.StateStarted, false, false, 0
	}
}

func TestAlignWrappedRingBuffer(t *testing.T) {
	dumps := synthJob{ranks: 4, colls: 40, straggler: -1, jitter: 0.03, seed: 3}.dumps()
	// Each rank's buffer wrapped at a different point: they hold different windows.
	dumps[0].Dump.Entries = dumps[0].Dump.Entries[5:]
	dumps[1].Dump.Entries = dumps[1].Dump.Entries[12:]
	dumps[3].Dump.Entries = dumps[3].Dump.Entries[1:]

	al := alignDumps(dumps)
	assert.Equal(t, int64(12), al.windowStart, "the largest first record_id")
	require.Len(t, al.groups, 1)
	g := al.groups[0]
	assert.Equal(t, []int{0, 1, 2, 3}, g.ranks)
	require.Len(t, g.colls, 28)
	assert.Equal(t, int64(13), g.colls[0].seq, "record 12 is collective 13")
	for _, c := range g.colls {
		assert.NotContains(t, c.entries, (*Op)(nil), "seq %d", c.seq)
	}
	for _, v := range al.views {
		assert.Len(t, v.window, 28, "rank %d", v.rank)
	}

	rep := Analyze(dumps, Options{})
	assert.Empty(t, rep.Findings, "older collectives that only some ranks still hold are not missing ranks")
	assert.Equal(t, int64(12), rep.WindowStartRecordID)
}

func TestAlignWrappedRingBufferWithHang(t *testing.T) {
	dumps := synthJob{ranks: 4, colls: 40, straggler: -1, jitter: 0.03, seed: 4}.dumps()
	dumps[2].Dump.Entries = dumps[2].Dump.Entries[7:]
	hangLast(dumps, 1)

	rep := Analyze(dumps, Options{})
	require.NotEmpty(t, rep.Findings)
	f := rep.Findings[0]
	assert.Equal(t, KindMissingRanks, f.Kind)
	assert.Equal(t, int64(40), f.Seq)
	assert.Equal(t, []int{1}, f.Ranks)
	assert.Equal(t, "39", f.Evidence[rankKey(1, "last_collective_in_dump")])
}

// A rank that dumped earlier lacks collectives the others completed: every
// rank joined them (they could not complete otherwise), so no one is missing.
func TestAlignStaleDumpIsNotAHang(t *testing.T) {
	dumps := synthJob{ranks: 4, colls: 30, straggler: -1, jitter: 0.03, seed: 5}.dumps()
	d := dumps[3].Dump
	d.Entries = d.Entries[:27]
	d.PGStatus["0"] = frdump.PGStatus{LastEnqueued: 27, LastStarted: 27, LastCompleted: 27}

	rep := Analyze(dumps, Options{})
	require.Equal(t, []Kind{KindPGStatusDivergence}, kinds(rep.Findings))
	assert.Equal(t, []int{3}, rep.Findings[0].Ranks)
	assert.Equal(t, int64(28), rep.Findings[0].Seq)
}

func TestAlignP2POnly(t *testing.T) {
	dumps := make([]RankDump, 2)
	for r := range dumps {
		d := &frdump.Dump{PGStatus: map[string]frdump.PGStatus{"0": {LastEnqueued: -1, LastStarted: -1, LastCompleted: -1}}}
		for i := range 20 {
			name := "nccl:send 0->1"
			if r == 1 {
				name = "nccl:recv 1<-0"
			}
			d.Entries = append(d.Entries, frdump.Entry{
				RecordID: int64(i), PGName: "0", PGDesc: "default_pg", P2PSeqID: int64(i + 1), ProfilingName: name,
				IsP2P: true, State: frdump.StateCompleted, Retired: true, TimeCreatedNs: int64(i) * 1e9,
				InputSizes: [][]int64{{int64(r + 1)}}, // would be a size mismatch if aligned
			})
		}
		dumps[r] = RankDump{Rank: r, Dump: d}
	}
	al := alignDumps(dumps)
	assert.Empty(t, al.groups, "p2p entries take no part in the alignment")
	assert.Empty(t, Analyze(dumps, Options{}).Findings)
}

// p2p entries repeat the last collective's collective_seq_id; they must not
// pose as duplicates or mismatches of it.
func TestAlignP2PBetweenCollectives(t *testing.T) {
	dumps := synthJob{ranks: 3, colls: 10, straggler: -1, jitter: 0.03, seed: 6}.dumps()
	for r := range dumps {
		d := dumps[r].Dump
		p2p := frdump.Entry{RecordID: 100, PGName: "0", CollectiveSeqID: 5, P2PSeqID: 1, ProfilingName: "nccl:send 0->1",
			InputDtypes: []string{"Int64"}, State: frdump.StateCompleted, Retired: true}
		if r == 1 {
			p2p.ProfilingName = "nccl:recv 1<-0" // no is_p2p flag: recognised by name
		} else {
			p2p.IsP2P = true
		}
		d.Entries = append(d.Entries, p2p)
	}
	al := alignDumps(dumps)
	require.Len(t, al.groups, 1)
	assert.Len(t, al.groups[0].colls, 10)
	assert.Equal(t, "nccl:all_reduce", al.groups[0].colls[4].entries[1].ProfilingName)
	assert.Empty(t, Analyze(dumps, Options{}).Findings)
}

func TestAlignSeveralGroups(t *testing.T) {
	// Ranks 0-3 in the default group; ranks 0 and 2 also in group "1".
	dumps := synthJob{ranks: 4, colls: 12, straggler: -1, jitter: 0.03, seed: 7}.dumps()
	for _, r := range []int{0, 2} {
		d := dumps[r].Dump
		for seq := 1; seq <= 5; seq++ {
			d.Entries = append(d.Entries, frdump.Entry{RecordID: int64(11 + seq), PGID: 1, PGName: "1", PGDesc: "tp",
				CollectiveSeqID: int64(seq), ProfilingName: "nccl:all_gather", State: frdump.StateCompleted, Retired: true})
		}
		d.PGConfig["1"] = frdump.PGConfig{Name: "1", Desc: "tp", Ranks: []int{2, 0}}
	}
	al := alignDumps(dumps)
	require.Len(t, al.groups, 2)
	tp := al.groups[1]
	assert.Equal(t, "1", tp.name)
	assert.Equal(t, "tp", tp.desc)
	assert.Equal(t, []int{0, 2}, tp.ranks)
	assert.Equal(t, []int{0, 2}, tp.expected)
	assert.Len(t, tp.colls, 5)
	assert.Empty(t, Analyze(dumps, Options{}).Findings)
}

// alignDumps aligns whole dumps, as Analyze does.
func alignDumps(dumps []RankDump) *aligned {
	ranks := make([]*Rank, 0, len(dumps))
	for _, d := range dumps {
		if d.Dump != nil {
			ranks = append(ranks, Compact(d.Rank, d.Dump))
		}
	}
	return align(ranks)
}
