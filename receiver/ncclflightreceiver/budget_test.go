package ncclflightreceiver

import (
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/analysis"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump/frdumptest"
)

// The default budget comes from GOMEMLIMIT, else the cgroup the process is
// in (v2, then v1), else a constant; a configured one wins.
func TestDecodeBudgetDerivedFromTheMemoryLimit(t *testing.T) {
	root := func(files map[string]string) string {
		dir := t.TempDir()
		for name, content := range files {
			p := filepath.Join(dir, name)
			require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
			require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
		}
		return dir
	}
	const mib = 1 << 20
	v2 := root(map[string]string{
		"proc/self/cgroup": "0::/kubepods/burstable/pod1/agent\n",
		"sys/fs/cgroup/kubepods/burstable/pod1/agent/memory.max": "268435456\n",
	})
	v2Unlimited := root(map[string]string{"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "max\n"})
	v1 := root(map[string]string{
		"proc/self/cgroup": "12:cpu,cpuacct:/x\n7:memory:/system.slice/agent.service\n",
		"sys/fs/cgroup/memory/system.slice/agent.service/memory.limit_in_bytes": "536870912\n",
	})
	v1Unlimited := root(map[string]string{
		"proc/self/cgroup": "7:memory:/\n", "sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
	})
	for _, c := range []struct {
		name       string
		configured int64
		goMemLimit int64
		root       string
		want       int64
		from       decodeBudgetSource
	}{
		{"configured", 100 * mib, 140 * mib, v2, 100 * mib, budgetFromConfig},
		{"the DaemonSet's GOMEMLIMIT=140MiB", 0, 140 * mib, v2, 70 * mib, budgetFromGoMemLimit},
		{"a tiny GOMEMLIMIT: the floor", 0, 10 * mib, v2, minDecodeBudget, budgetFromGoMemLimit},
		{"cgroup v2, 256 MiB", 0, math.MaxInt64, v2, 64 * mib, budgetFromCgroup},
		{"cgroup v1, 512 MiB", 0, math.MaxInt64, v1, 128 * mib, budgetFromCgroup},
		{"cgroup v2 without a limit", 0, math.MaxInt64, v2Unlimited, defaultMemoryLimit / 4, budgetFromDefault},
		{"cgroup v1 without a limit", 0, math.MaxInt64, v1Unlimited, defaultMemoryLimit / 4, budgetFromDefault},
		{"no cgroup at all", 0, math.MaxInt64, t.TempDir(), 64 * mib, budgetFromDefault},
	} {
		got, from := decodeBudgetFor(c.configured, c.goMemLimit, c.root)
		assert.Equal(t, c.want, got, c.name)
		assert.Equal(t, c.from, from, c.name)
	}
}

// writeJob writes ranks synthetic dumps of entries each into dir; rank
// behind enqueues its last ten collectives later than the others (it dumped
// ten collectives earlier), which the cross-rank analysis reports.
func writeJob(t *testing.T, dir string, ranks, entries, behind int) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for rank := range ranks {
		n := entries
		if rank == behind {
			n -= 10
		}
		d := frdumptest.Synthetic(frdumptest.SyntheticConfig{Rank: rank, WorldSize: ranks, Entries: n})
		require.NoError(t, os.WriteFile(filepath.Join(dir, "nccl_trace_rank_"+strconv.Itoa(rank)), frdumptest.Pickle(d), 0o644))
	}
}

// Many dumps of one job, more than the decode budget holds the records of:
// what the receiver holds never passes the budget, the dumps that do not
// fit are skipped, each counted and logged as over_decode_budget, and the
// job still gets the cross-rank analysis of the rest. A dump ten times
// larger than the others, read once the budget is full, is skipped the
// same way.
func TestManyDumpsStayWithinTheDecodeBudget(t *testing.T) {
	dir := t.TempDir()
	const ranks = 40
	writeJob(t, dir, ranks, 2000, 1)
	big := filepath.Join(dir, "nccl_trace_rank_"+strconv.Itoa(ranks))
	require.NoError(t, os.WriteFile(big, frdumptest.Pickle(frdumptest.Synthetic(frdumptest.SyntheticConfig{Rank: ranks, Entries: 20000})), 0o644))
	cfg := fastConfig(dir)
	cfg.FlightRecorder.DecodeBudget = minDecodeBudget
	e := startObserved(t, cfg, observeOptions{})
	defer e.stop(t)

	skipped := func() int64 {
		return e.refusedInputs(t, semconv.NCCLSourceFlightRecorder, reasonOverDecodeBudget)
	}
	require.Eventually(t, func() bool { return e.logs.LogRecordCount() > 0 }, 3*time.Minute, 10*time.Millisecond, "the job's findings")
	e.r.mu.Lock()
	kept := len(e.r.latest[dir])
	budget := *e.r.budget
	e.r.mu.Unlock()
	t.Logf("decode budget %d bytes: %d ranks kept (%d bytes held), %d skipped, peak %d bytes", budget.limit, kept, budget.total, skipped(), budget.peak)

	assert.LessOrEqual(t, budget.peak, budget.limit, "never more than the budget held")
	assert.LessOrEqual(t, budget.total, budget.limit)
	assert.Zero(t, budget.reserved, "nothing in flight once read")
	assert.Greater(t, kept, 10, "the dumps that fit are kept")
	assert.Less(t, kept, ranks, "more ranks than the budget holds")
	assert.Equal(t, int64(ranks+1-kept), skipped(), "every other dump skipped and counted, the over-large one too")
	lines := e.obs.FilterMessageSnippet("needs more memory than the decode budget has free").All()
	require.Len(t, lines, ranks+1-kept, "each logged")
	names := map[any]bool{}
	for _, l := range lines {
		assert.Equal(t, reasonOverDecodeBudget, l.ContextMap()["reason"])
		names[l.ContextMap()["path"]] = true
	}
	assert.True(t, names[big], "the large dump is named")

	// The job is analysed over the ranks kept: rank 1 behind the others.
	var finding plog.LogRecord
	found := false
	for _, ld := range e.logs.AllLogs() {
		lrs := ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords()
		for i := 0; i < lrs.Len(); i++ {
			if kind, _ := lrs.At(i).Attributes().Get(semconv.AttrNCCLFinding); kind.Str() == string(analysis.KindPGStatusDivergence) {
				finding, found = lrs.At(i), true
			}
		}
	}
	require.True(t, found, "the job's analysis reports rank 1 behind")
	ranksOf, _ := finding.Attributes().Get(semconv.AttrNCCLRanks)
	assert.Equal(t, []any{int64(1)}, ranksOf.Slice().AsRaw())
	ev, _ := finding.Attributes().Get(semconv.AttrNCCLEvidence)
	progress := 0
	for k := range ev.Map().AsRaw() {
		if strings.HasPrefix(k, "rank.") && strings.HasSuffix(k, ".last_enqueued_collective") {
			progress++
		}
	}
	assert.Equal(t, kept, progress, "every rank kept takes part")
	// Every dump read emitted its spans: 2,000 a rank, 1,990 for rank 1.
	assert.Equal(t, (kept-1)*2000+1990, e.traces.SpanCount())
}

// A job whose dumps no longer come (it ended) does not keep the budget from
// another: its records are forgotten, least recently read first, to make
// room, and the new job's dumps are all read.
func TestOtherJobsRecordsAreForgottenToMakeRoom(t *testing.T) {
	root := t.TempDir()
	first, second := filepath.Join(root, "job-a", "0"), filepath.Join(root, "job-b", "0")
	writeJob(t, first, 20, 2000, -1)
	cfg := fastConfig(root)
	cfg.FlightRecorder.DecodeBudget = minDecodeBudget
	e := startObserved(t, cfg, observeOptions{})
	defer e.stop(t)
	kept := func(dir string) int {
		e.r.mu.Lock()
		defer e.r.mu.Unlock()
		return len(e.r.latest[dir])
	}
	require.Eventually(t, func() bool { return kept(first) == 20 }, 3*time.Minute, 10*time.Millisecond)

	writeJob(t, second, 20, 2000, -1)
	require.Eventually(t, func() bool { return kept(second) == 20 }, 3*time.Minute, 10*time.Millisecond)
	assert.Zero(t, kept(first), "the first job's records were forgotten")
	assert.Zero(t, e.refusedInputs(t, semconv.NCCLSourceFlightRecorder, reasonOverDecodeBudget), "no dump skipped")
	forgot := e.obs.FilterMessageSnippet("forgetting the analysis records").All()
	require.Len(t, forgot, 1)
	assert.Equal(t, first, forgot[0].ContextMap()["directory"])
	e.r.mu.Lock()
	defer e.r.mu.Unlock()
	assert.LessOrEqual(t, e.r.budget.peak, e.r.budget.limit)
}

// The accounting's pieces: a reservation takes what is free and no more,
// charges replace each other by key.
func TestMemoryBudgetAccounting(t *testing.T) {
	b := newMemoryBudget(100)
	assert.True(t, b.reserve(60))
	assert.False(t, b.reserve(41), "more than is free")
	b.set("a", 30)
	assert.Equal(t, int64(10), b.free())
	b.release(60)
	b.set("a", 20)
	b.set("pending", 5)
	assert.Equal(t, int64(75), b.free())
	b.set("a", 0)
	assert.Equal(t, int64(95), b.free())
	assert.Equal(t, int64(90), b.peak)
	assert.NotContains(t, b.held, "a")
}

// A dump's entries are held as compact records: what each costs, measured
// on torch's default ring buffer and the largest dump read.
func TestRankRecordsAreCompact(t *testing.T) {
	for _, n := range []int{2000, 20000} {
		d := frdumptest.Synthetic(frdumptest.SyntheticConfig{Entries: n})
		rk := analysis.Compact(0, d)
		per := float64(rankCharge(rk)) / float64(n)
		t.Logf("%d entries: %d bytes of records (%.0f bytes an entry); the analysis holds %d more an entry while it runs", n, rk.Bytes, per, analysisBytesPerOp)
		assert.Less(t, per, 100.0, "bytes an entry, all counted")
		assert.Less(t, rk.Bytes, int64(n)*int64(unsafe.Sizeof(frdump.Entry{}))/2, "under half of what frdump.Entry alone takes")
	}
}
