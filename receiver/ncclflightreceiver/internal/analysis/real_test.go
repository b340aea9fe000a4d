package analysis

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"
)

// The real dumps of a 16-rank Megatron-LM MoE job (testdata/real/SOURCES.txt
// of the receiver), parsed as the receiver does, and NVIDIA's reference
// answer for each incident.

const realWorld = 16

func loadReal(t testing.TB, incident string) []RankDump {
	t.Helper()
	out := make([]RankDump, realWorld)
	for r := range realWorld {
		raw, err := os.ReadFile(filepath.Join("..", "..", "testdata", "real", "nvrx-megatron-moe", incident, "_dump_"+strconv.Itoa(r)))
		require.NoError(t, err)
		d, warnings, err := frdump.Parse(raw)
		require.NoError(t, err, "rank %d", r)
		require.Empty(t, warnings, "rank %d", r)
		out[r] = RankDump{Rank: r, Dump: d}
	}
	return out
}

type realAnswer struct {
	incident       string
	culprits       []int
	pgName, pgDesc string
	seq            int64
	op, size, dt   string
	entered        []int
}

var realAnswers = []realAnswer{
	{incident: "gpu_error_1st", culprits: []int{12}, pgName: "74", pgDesc: "EXPERT_MODEL_PARALLEL_GROUP",
		seq: 20537, op: "nccl:all_to_all", size: "4027x5120", dt: "BFloat16", entered: []int{13, 14, 15}},
	{incident: "lock_gil_1st", culprits: []int{9, 14}, pgName: "72", pgDesc: "EXPERT_MODEL_PARALLEL_GROUP",
		seq: 45265, op: "nccl:all_to_all", size: "2048x5120", dt: "BFloat16", entered: []int{8, 10, 11, 12, 13, 15}},
}

// checkHeadline asserts one finding, the hang, naming the reference's
// culprits and collective.
func checkHeadline(t *testing.T, name string, rep Report, want realAnswer) {
	t.Helper()
	require.Len(t, rep.Findings, 1, "%s:\n%s", name, describe(rep.Findings))
	h := rep.Headline()
	require.NotNil(t, h, name)
	assert.Equal(t, &rep.Findings[0], h)
	assert.Equal(t, want.culprits, h.Ranks, name)
	assert.Equal(t, want.pgName, h.PGName, name)
	assert.Equal(t, want.pgDesc, h.PGDesc, name)
	assert.Equal(t, want.op, h.ProfilingName, name)
	assert.Equal(t, want.seq, h.Seq, name)
	require.NotNil(t, h.Stuck, name)
	assert.Equal(t, want.size, h.Stuck.Sizes(), name)
	assert.Equal(t, want.dt, h.Stuck.Dtype(), name)
	assert.Equal(t, want.culprits, h.Stuck.Missing, name)
	assert.Equal(t, want.entered, h.Stuck.Entered, name)
	assert.Contains(t, h.Message, "pg "+want.pgName+":"+want.pgDesc+" seq "+strconv.FormatInt(want.seq, 10)+" "+want.op+" "+want.size+" "+want.dt, name)
	for _, r := range want.culprits {
		assert.Contains(t, h.Evidence[rankKey(r, EvidenceStuckCollective)], want.op+" "+want.size+" "+want.dt, name)
	}
	for _, f := range h.Folded {
		assert.Contains(t, []Kind{KindMissingRanks, KindPGStatusDivergence}, f.Kind, name)
	}
}

// Whatever the dump moments say: unknown (a copy that did not keep the
// file times), the time of a copy (a year after the incident), or the
// incident's (each rank dumping when its watchdog gave up, 180 s after its
// newest enqueue, seconds apart).
func TestRealIncidentsHeadline(t *testing.T) {
	for _, want := range realAnswers {
		for _, moment := range []string{"unknown", "copy", "watchdog"} {
			dumps := loadReal(t, want.incident)
			for i, d := range dumps {
				switch moment {
				case "copy":
					d.Dump.DumpedAtNs = time.Date(2026, 12, 5, 18, 47, 0, 0, time.UTC).UnixNano()
				case "watchdog":
					d.Dump.DumpedAtNs = newestOf(dumps) + 180_000_000_000 + int64(i)*1_000_000_000
				}
			}
			checkHeadline(t, want.incident+"/"+moment, Analyze(dumps, Options{}), want)
		}
	}
}

func newestOf(dumps []RankDump) int64 {
	var n int64
	for _, d := range dumps {
		n = max(n, lastCreated(d.Dump))
	}
	return n
}

// The facts of the real format the analysis relies on: pg_status keys are
// not pg_config's names and name different groups on different ranks; the
// GIL-stuck ranks' dumps hold no entries.
func TestRealFormatFacts(t *testing.T) {
	dumps := loadReal(t, "lock_gil_1st")
	for _, r := range []int{9, 14} {
		assert.Empty(t, dumps[r].Dump.Entries, "rank %d", r)
		assert.NotEmpty(t, dumps[r].Dump.PGStatus, "rank %d", r)
	}
	notNames := 0
	for key := range dumps[0].Dump.PGStatus {
		if _, ok := dumps[0].Dump.PGConfig[key]; !ok {
			notNames++
		}
	}
	assert.Positive(t, notNames, "rank 0's pg_status keys are not its groups' names")
	// pg_id 6 is PIPELINE_MODEL_PARALLEL_GROUP "39" on rank 0, "42" on rank 1.
	names := map[int]string{}
	for _, r := range []int{0, 1} {
		for _, e := range dumps[r].Dump.Entries {
			if e.PGID == 6 {
				names[r] = e.PGName
			}
		}
	}
	assert.Equal(t, map[int]string{0: "39", 1: "42"}, names)
	// Resolved by name, the groups of rank 0 and 8 never share a key they
	// do not share a group for.
	r8 := resolveGroupStatus(Compact(8, dumps[8].Dump))
	assert.Contains(t, r8, "72")
	assert.NotContains(t, resolveGroupStatus(Compact(0, dumps[0].Dump)), "72")
	assert.Empty(t, resolveGroupStatus(Compact(9, dumps[9].Dump)), "a rank with no entries resolves nothing")
}
