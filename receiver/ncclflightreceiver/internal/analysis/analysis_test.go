package analysis

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// --- fixtures -------------------------------------------------------------

func loadFixture(t testing.TB, dir string, ranks int) []RankDump {
	t.Helper()
	out := make([]RankDump, ranks)
	for r := range ranks {
		// The fixtures live once, with the parser that reads them.
		raw, err := os.ReadFile(filepath.Join("..", "frdump", "testdata", dir, "nccl_trace_rank_"+strconv.Itoa(r)))
		require.NoError(t, err)
		d, _, err := frdump.Parse(raw)
		require.NoError(t, err)
		out[r] = RankDump{Rank: r, Dump: d}
	}
	return out
}

func kinds(fs []Finding) []Kind {
	out := make([]Kind, len(fs))
	for i, f := range fs {
		out[i] = f.Kind
	}
	return out
}

// --- synthetic jobs ---------------------------------------------------------

// synthJob models a data-parallel job like gen_fr_dumps.py does: every rank
// computes ~190 ms, enqueues the collective, and the collective completes on
// all ranks 9 ms after the last one joined. Each rank's clock is skewed by
// whole seconds, so only offsets within a rank's own clock are comparable.
type synthJob struct {
	ranks, colls int
	straggler    int     // -1: none
	lagMs        float64 // extra compute of the straggler per collective
	jitter       float64 // compute jitter, ± share (0.03 = ±3%)
	seed         uint64
	noTiming     bool // no duration_ms (TORCH_NCCL_ENABLE_TIMING unset)
	noDiscovered bool // no watchdog completion times either
}

func (j synthJob) dumps() []RankDump {
	rnd := rand.New(rand.NewPCG(j.seed, 42))
	const t0 = int64(1764403200000000000)
	ranksStr := make([]int, j.ranks)
	for r := range ranksStr {
		ranksStr[r] = r
	}
	out := make([]RankDump, j.ranks)
	for r := range out {
		out[r] = RankDump{Rank: r, Dump: &frdump.Dump{
			Version:  frdump.Newest,
			PGConfig: map[string]frdump.PGConfig{"0": {Name: "0", Desc: "default_pg", Ranks: ranksStr}},
			PGStatus: map[string]frdump.PGStatus{"0": {LastEnqueued: int64(j.colls), LastStarted: int64(j.colls), LastCompleted: int64(j.colls)}},
			Entries:  make([]frdump.Entry, 0, j.colls),
		}}
	}
	free := t0
	enq := make([]int64, j.ranks)
	for seq := 1; seq <= j.colls; seq++ {
		last := int64(math.MinInt64)
		for r := range enq {
			comp := 190.0 * (1 + j.jitter*(2*rnd.Float64()-1))
			if r == j.straggler {
				comp += j.lagMs
			}
			enq[r] = free + int64(comp*1e6)
			last = max(last, enq[r])
		}
		done := last + int64(9e6)
		for r := range enq {
			skew := int64(r) * 3_000_000_000 // node clocks differ by seconds
			start := enq[r] + 20_000
			e := frdump.Entry{
				RecordID: int64(seq - 1), PGID: 0, PGName: "0", PGDesc: "default_pg",
				CollectiveSeqID: int64(seq), OpID: int64(seq), ProfilingName: "nccl:all_reduce",
				TimeCreatedNs: enq[r] + skew,
				InputSizes:    [][]int64{{13107200}}, OutputSizes: [][]int64{{13107200}},
				InputDtypes: []string{"BFloat16"}, OutputDtypes: []string{"BFloat16"},
				State: frdump.StateCompleted, Retired: true, TimeoutMs: 600000,
				TimeDiscoveredStartedNs: start + 500_000 + skew,
			}
			if !j.noDiscovered {
				e.TimeDiscoveredCompletedNs = done + 300_000 + int64(rnd.IntN(700_000)) + skew
			}
			if !j.noTiming {
				e.DurationMs, e.HasDuration = float64(done-start)/1e6, true
			}
			out[r].Dump.Entries = append(out[r].Dump.Entries, e)
		}
		free = done
	}
	return out
}

// --- the fixtures' expected findings (SOURCES.txt) --------------------------

func TestFixtureStraggler(t *testing.T) {
	rep := Analyze(loadFixture(t, "dp8-straggler5-v2.10", 8), Options{})
	require.Len(t, rep.Findings, 1, "no hang, no mismatch: only the straggler; got %v", kinds(rep.Findings))
	f := rep.Findings[0]
	assert.Equal(t, KindStraggler, f.Kind)
	assert.Equal(t, []int{5}, f.Ranks)
	assert.Equal(t, "0", f.PGName)
	assert.Equal(t, "default_pg", f.PGDesc)
	assert.Equal(t, int64(50), f.Seq)
	// Rank 5 is last to enqueue and shortest in every scored collective (the
	// first collective has no previous completion to measure from).
	assert.Equal(t, "49", f.Evidence["collectives_scored"])
	assert.Equal(t, "49", f.Evidence["last_to_enqueue"])
	assert.Equal(t, "49", f.Evidence["shortest_duration"])
	assert.Equal(t, anchorPrevious, f.Evidence["anchor"])
	for r := range 8 {
		if r != 5 {
			assert.Equal(t, "0", f.Evidence[rankKey(r, "last_to_enqueue_count")], "rank %d", r)
		}
	}
	assert.True(t, strings.HasPrefix(f.Message, "Straggler rank 5: enqueued last in 49 of 49 collectives"), f.Message)
	assert.Contains(t, f.Message, "group info: 0:default_pg")
	assert.Equal(t, []int{0, 1, 2, 3, 4, 5, 6, 7}, rep.Ranks)
}

func TestFixtureHang(t *testing.T) {
	rep := Analyze(loadFixture(t, "dp4-hang2-v2.4", 4), Options{})
	require.Equal(t, []Kind{KindMissingRanks, KindPGStatusDivergence}, kinds(rep.Findings))

	hang := rep.Findings[0]
	assert.Equal(t, int64(17), hang.Seq)
	assert.Equal(t, "nccl:all_reduce", hang.ProfilingName)
	assert.Equal(t, "default_pg", hang.PGDesc)
	assert.Equal(t, []int{2}, hang.Ranks)
	assert.Equal(t, "Not all ranks joining collective, sequence number: 17\n"+
		"internal record id: 16\n"+
		"group info: 0:default_pg\n"+
		"collective: nccl:all_reduce\n"+
		"missing ranks: {2}\n"+
		"input sizes: [[13107200]]\n"+
		"output sizes: [[13107200]]\n"+
		"world size: 4\n"+
		"expected ranks: {0, 1, 2, 3}\n"+
		"collective state: started\n"+
		"later collectives also missing ranks: 18-19", hang.Message)
	assert.Equal(t, "16", hang.Evidence[rankKey(2, "last_collective_in_dump")])
	assert.Equal(t, "started", hang.Evidence[rankKey(0, "state")])

	div := rep.Findings[1]
	assert.Equal(t, []int{2}, div.Ranks)
	assert.Equal(t, int64(17), div.Seq)
	assert.Equal(t, "nccl:all_reduce", div.ProfilingName)
	for _, r := range []int{0, 1, 3} {
		assert.Equal(t, "16", div.Evidence[rankKey(r, "last_completed_collective")], "rank %d", r)
		assert.Equal(t, "19", div.Evidence[rankKey(r, "last_enqueued_collective")], "rank %d", r)
	}
	assert.Equal(t, "16", div.Evidence[rankKey(2, "last_enqueued_collective")])
	assert.Contains(t, div.Message, "last enqueued collective: ranks {0, 1, 3}: 19; rank 2: 16")
	assert.Contains(t, div.Message, "last completed collective: ranks {0, 1, 2, 3}: 16")
	assert.NotEqual(t, hang.Key(), div.Key())
}

func TestFixtureHealthy(t *testing.T) {
	rep := Analyze(loadFixture(t, "dp4-healthy-v2.7", 4), Options{})
	assert.Empty(t, rep.Findings)
	assert.Equal(t, []int{0, 1, 2, 3}, rep.Ranks)
}

// --- edges -----------------------------------------------------------------

func TestAnalyzeEmptyAndSingleRank(t *testing.T) {
	assert.Empty(t, Analyze(nil, Options{}).Findings)
	assert.Empty(t, Analyze([]RankDump{{Rank: 3}}, Options{}).Findings, "a nil dump is skipped")
	assert.Empty(t, Analyze([]RankDump{{Rank: 0, Dump: &frdump.Dump{}}}, Options{}).Findings)

	one := loadFixture(t, "dp4-hang2-v2.4", 4)[:1]
	rep := Analyze(one, Options{})
	assert.Empty(t, rep.Findings)
	assert.Equal(t, []int{0}, rep.Ranks)
}

func TestAnalyzeDuplicateRankLaterWins(t *testing.T) {
	healthy := loadFixture(t, "dp4-healthy-v2.7", 4)
	hung := loadFixture(t, "dp4-hang2-v2.4", 4)
	// Rank 2 appears twice: the healthy job's dump, then the hung job's one
	// (the hung job's ranks 0, 1, 3 around it).
	dumps := []RankDump{hung[0], hung[1], healthy[2], hung[2], hung[3]}
	rep := Analyze(dumps, Options{})
	assert.Equal(t, []int{0, 1, 2, 3}, rep.Ranks)
	require.NotEmpty(t, rep.Findings)
	assert.Equal(t, KindMissingRanks, rep.Findings[0].Kind)
}

func TestFindingKey(t *testing.T) {
	f := Finding{Kind: KindMissingRanks, PGName: "0", Seq: 17, Ranks: []int{2}}
	g := f
	g.Ranks, g.Message = []int{2, 3}, "other words"
	assert.Equal(t, f.Key(), g.Key(), "the key ignores ranks and wording")
	assert.Equal(t, "pg=0/coll:17/missing_ranks", f.Key().String())
	g.P2P = true
	assert.NotEqual(t, f.Key(), g.Key())
	assert.Equal(t, "pg=0/p2p:17/missing_ranks", g.Key().String())
}

func TestOptionsDefaults(t *testing.T) {
	assert.Equal(t, DefaultOptions(), Options{}.withDefaults())
	odd := Options{StragglerMinShare: math.NaN(), StragglerLagFactor: -1, StragglerMinLag: -time.Second}.withDefaults()
	assert.Equal(t, DefaultOptions(), odd)
	set := Options{StragglerMinShare: 0.9, MinStatusGap: 3}.withDefaults()
	assert.InDelta(t, 0.9, set.StragglerMinShare, 0)
	assert.Equal(t, int64(3), set.MinStatusGap)
}

// FuzzAnalyze builds dumps from arbitrary bytes: Analyze must never panic.
func FuzzAnalyze(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x03\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10"))
	f.Add(make([]byte, 200))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			Analyze(nil, Options{})
			return
		}
		nRanks := int(data[0]%6) + 1
		dumps := make([]RankDump, nRanks)
		for r := range dumps {
			dumps[r] = RankDump{Rank: r % 4, Dump: &frdump.Dump{PGStatus: map[string]frdump.PGStatus{}, PGConfig: map[string]frdump.PGConfig{}}}
		}
		names := []string{"nccl:all_reduce", "nccl:broadcast", "nccl:send 0->1", "nccl:all_to_all", "nccl:gather"}
		states := []string{frdump.StateScheduled, frdump.StateStarted, frdump.StateCompleted, ""}
		for i := 1; i+8 <= len(data); i += 8 {
			b := data[i : i+8]
			d := dumps[int(b[0])%nRanks].Dump
			e := frdump.Entry{
				RecordID: int64(b[1] % 16), PGID: int64(b[2] % 3), PGName: strconv.Itoa(int(b[2] % 3)),
				CollectiveSeqID: int64(int8(b[3])), P2PSeqID: int64(b[3] % 4),
				ProfilingName: names[int(b[4])%len(names)], State: states[int(b[5])%len(states)],
				TimeCreatedNs: int64(binary.LittleEndian.Uint16(b[6:])) * int64(b[1]) * 1e9,
				Retired:       b[5]&4 != 0, IsP2P: b[4]&8 != 0,
				InputSizes: [][]int64{{int64(b[7] % 3)}}, InputDtypes: []string{[]string{"Float", "BFloat16", ""}[b[6]%3]},
				TimeDiscoveredCompletedNs: int64(b[7]) << 56,
			}
			if b[5]&8 != 0 {
				e.DurationMs, e.HasDuration = []float64{math.NaN(), math.Inf(1), -1, 0.5, 1e300}[int(b[7])%5], true
			}
			d.Entries = append(d.Entries, e)
			d.PGStatus[e.PGName] = frdump.PGStatus{LastEnqueued: int64(int8(b[6])), LastStarted: -1, LastCompleted: int64(int8(b[7]))}
			// the culprit analysis: dump times and group members
			d.DumpedAtNs = int64(b[6]) * 1e11
			d.PGConfig[e.PGName] = frdump.PGConfig{Name: e.PGName, Ranks: []int{3, 0, 1, 2}[:int(b[3])%4+1]}
		}
		rep := Analyze(dumps, Options{StragglerMinCollectives: 1, StragglerMinRanks: 1})
		for _, fd := range rep.Findings {
			require.NotEmpty(t, fd.Message)
		}
	})
}

// BenchmarkAnalyze8x2000: 8 ranks × 2,000 entries (torch's default buffer).
func BenchmarkAnalyze8x2000(b *testing.B) {
	dumps := synthJob{ranks: 8, colls: 2000, straggler: 5, lagMs: 150, jitter: 0.03, seed: 1}.dumps()
	b.ReportAllocs()
	for b.Loop() {
		rep := Analyze(dumps, Options{})
		if len(rep.Findings) != 1 {
			b.Fatalf("want the straggler only, got %v", kinds(rep.Findings))
		}
	}
}
