package faultconsoleextension

import (
	"fmt"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/console"
	"github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension/consoletest"
)

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func testLimits() storeLimits {
	return storeLimits{MaxFaults: 100, ResolvedRetention: time.Hour, MaxJobs: 4, HeatmapSteps: 5, MaxRanks: 8, MaxHeatmapCells: 1 << 20}
}

func fault(id, state string, onset time.Time) console.Fault {
	return console.Fault{ID: id, Type: "xid_79", Severity: "P1", State: state, Node: "node-" + id, Rank: -1, Step: -1, FirstSeen: onset, LastSeen: onset}
}

func ids(views []faultView) []string {
	out := make([]string, len(views))
	for i, v := range views {
		out[i] = v.Fault.ID
	}
	return out
}

func TestStoreFaultsNewestFirstAndReplace(t *testing.T) {
	clk := newFakeClock()
	s := newStore(testLimits(), clk.Now, nil)
	t0 := clk.Now()
	s.RecordFault(fault("a", console.StateOpen, t0))
	s.RecordFault(fault("b", console.StateOpen, t0.Add(time.Minute)))
	s.RecordFault(fault("c", console.StateResolved, t0.Add(2*time.Minute)))
	s.RecordFault(console.Fault{}) // no ID: ignored
	assert.Equal(t, []string{"b", "a"}, ids(s.listFaults(false)))
	assert.Equal(t, []string{"c", "b", "a"}, ids(s.listFaults(true)))

	// A later record of a replaces it and keeps the onset; resolving closes it.
	later := fault("a", console.StateResolved, t0.Add(5*time.Minute))
	later.Decision = "acted"
	s.RecordFault(later)
	v, ok := s.fault("a")
	require.True(t, ok)
	assert.Equal(t, t0, v.Fault.FirstSeen)
	assert.Equal(t, "acted", v.Fault.Decision)
	assert.Equal(t, []string{"b"}, ids(s.listFaults(false)))
	st := s.counts()
	assert.Equal(t, 1, st.OpenFaults)
	assert.Equal(t, 2, st.ResolvedFaults)
}

func TestStoreFaultEvidenceIsCopied(t *testing.T) {
	s := newStore(testLimits(), nil, nil)
	f := fault("a", console.StateOpen, time.Now())
	f.Evidence = map[string]string{"xid": "79"}
	s.RecordFault(f)
	f.Evidence["xid"] = "changed"
	v, _ := s.fault("a")
	assert.Equal(t, "79", v.Fault.Evidence["xid"])
	v.Fault.Evidence["xid"] = "changed too"
	v, _ = s.fault("a")
	assert.Equal(t, "79", v.Fault.Evidence["xid"])
}

func TestStoreMaxFaultsEvictsResolvedFirst(t *testing.T) {
	clk := newFakeClock()
	var evicted []string
	l := testLimits()
	l.MaxFaults = 3
	s := newStore(l, clk.Now, func(kind, reason string) { evicted = append(evicted, kind+"/"+reason) })
	t0 := clk.Now()
	s.RecordFault(fault("open1", console.StateOpen, t0))
	s.RecordFault(fault("res1", console.StateResolved, t0))
	s.RecordFault(fault("open2", console.StateOpen, t0))
	s.RecordFault(fault("open3", console.StateOpen, t0)) // evicts res1, though open1 is older
	assert.ElementsMatch(t, []string{"open1", "open2", "open3"}, ids(s.listFaults(true)))
	s.RecordFault(fault("open4", console.StateOpen, t0)) // no resolved left: the oldest open goes
	assert.ElementsMatch(t, []string{"open2", "open3", "open4"}, ids(s.listFaults(true)))
	assert.Equal(t, []string{"fault/capacity", "fault/capacity"}, evicted)
	assert.Equal(t, uint64(2), s.counts().EvictedFaults)
}

func TestStoreResolvedRetention(t *testing.T) {
	clk := newFakeClock()
	var evicted []string
	s := newStore(testLimits(), clk.Now, func(kind, reason string) { evicted = append(evicted, kind+"/"+reason) })
	s.RecordFault(fault("old", console.StateResolved, clk.Now()))
	s.RecordFault(fault("open", console.StateOpen, clk.Now()))
	clk.Advance(30 * time.Minute)
	s.RecordFault(fault("young", console.StateResolved, clk.Now()))
	clk.Advance(31 * time.Minute) // old is 61m past its record, young 31m
	assert.ElementsMatch(t, []string{"open", "young"}, ids(s.listFaults(true)))
	_, ok := s.fault("old")
	assert.False(t, ok)
	clk.Advance(24 * time.Hour) // open faults are never aged out
	assert.Equal(t, []string{"open"}, ids(s.listFaults(true)))
	assert.Equal(t, []string{"fault/retention", "fault/retention"}, evicted)
}

func TestStoreAcknowledge(t *testing.T) {
	clk := newFakeClock()
	s := newStore(testLimits(), clk.Now, nil)
	s.RecordFault(fault("a", console.StateOpen, clk.Now()))
	_, ok := s.acknowledge("missing", console.Operator{Name: "x"})
	assert.False(t, ok)
	v, ok := s.acknowledge("a", console.Operator{Name: "alice", Remote: "10.0.0.1:5", Reason: "known"})
	require.True(t, ok)
	require.NotNil(t, v.Ack)
	assert.Equal(t, Ack{By: "alice", Remote: "10.0.0.1:5", Reason: "known", Time: clk.Now()}, *v.Ack)
	// A later record keeps the acknowledgement.
	s.RecordFault(fault("a", console.StateOpen, clk.Now()))
	v, _ = s.fault("a")
	require.NotNil(t, v.Ack)
	assert.Equal(t, "alice", v.Ack.By)
	assert.Equal(t, 1, s.counts().Acknowledged)
}

// A fault restored after the recorder restarted carries the acknowledgement
// its audit kept; one given here is not replaced by it.
func TestStoreTakesARestoredAcknowledgement(t *testing.T) {
	clk := newFakeClock()
	s := newStore(testLimits(), clk.Now, nil)
	restored := fault("a", console.StateOpen, clk.Now())
	earlier := clk.Now().Add(-time.Hour)
	restored.Ack = &console.Acknowledgement{By: "bob", Reason: "RMA open", Time: earlier}
	s.RecordFault(restored)
	v, ok := s.fault("a")
	require.True(t, ok)
	require.NotNil(t, v.Ack)
	assert.Equal(t, Ack{By: "bob", Reason: "RMA open", Time: earlier}, *v.Ack)
	assert.Nil(t, v.Fault.Ack, "the store keeps the acknowledgement beside the fault")
	assert.Equal(t, 1, s.counts().Acknowledged)

	// A new record without one keeps it; a newer acknowledgement here
	// replaces it, and a later restored one does not.
	s.RecordFault(fault("a", console.StateOpen, clk.Now()))
	v, _ = s.fault("a")
	require.NotNil(t, v.Ack)
	assert.Equal(t, "bob", v.Ack.By)
	_, ok = s.acknowledge("a", console.Operator{Name: "alice"})
	require.True(t, ok)
	s.RecordFault(restored)
	v, _ = s.fault("a")
	assert.Equal(t, "alice", v.Ack.By)
}

func step(job string, attempt, st, rank int64, compute time.Duration, verdict string) console.Step {
	return console.Step{Job: job, Attempt: attempt, Step: st, Rank: rank, Node: fmt.Sprintf("node-%d", rank/8),
		Compute: compute, Duration: compute + time.Millisecond, Verdict: verdict, Score: map[bool]float64{true: 4.5}[verdict != ""]}
}

func TestStoreHeatmap(t *testing.T) {
	s := newStore(testLimits(), nil, nil)
	for st := int64(1); st <= 3; st++ {
		for _, rank := range []int64{2, 0, 1} {
			verdict := ""
			if rank == 1 && st >= 2 {
				verdict = "straggler"
			}
			s.RecordStep(step("job", 0, st, rank, time.Duration(10+rank)*time.Millisecond, verdict))
		}
	}
	s.RecordStep(step("", 0, 1, 0, time.Millisecond, "")) // no job: ignored
	h, ok := s.heatmap("job", -1)
	require.True(t, ok)
	assert.Equal(t, []int64{0, 1, 2}, h.Ranks)
	assert.Equal(t, []int64{1, 2, 3}, h.Steps)
	assert.InDelta(t, 11.0, h.Cells[1][0].computeMS, 1e-6)
	assert.InDelta(t, 12.0, h.Cells[1][0].durationMS, 1e-6)
	assert.Equal(t, "straggler", h.Verdicts[h.Cells[1][2].verdict])
	assert.Equal(t, "", h.Verdicts[h.Cells[1][0].verdict])
	assert.InDelta(t, 4.5, h.Cells[1][2].score, 1e-6)
	assert.Equal(t, uint8(0), h.Cells[1][0].verdict)

	jobs := s.listJobs()
	require.Len(t, jobs, 1)
	assert.Equal(t, jobSummary{Job: "job", Ranks: 3, FirstStep: 1, LastStep: 3, Steps: 3, Updated: jobs[0].Updated,
		Stragglers: []rankVerdicts{{Rank: 1, Node: "node-0", Steps: 2}}}, jobs[0])

	_, ok = s.heatmap("job", 7)
	assert.False(t, ok)
	_, ok = s.heatmap("other", -1)
	assert.False(t, ok)
}

func TestStoreHeatmapBounds(t *testing.T) {
	var evicted []string
	s := newStore(testLimits(), nil, func(kind, reason string) { evicted = append(evicted, kind+"/"+reason) })
	// heatmap_steps 5: steps 1..7 keep 3..7; a late step 2 is dropped, a
	// missing step 4 in the middle is inserted in order.
	for _, st := range []int64{1, 2, 3, 5, 6, 7} {
		s.RecordStep(step("job", 0, st, 0, time.Millisecond, ""))
	}
	s.RecordStep(step("job", 0, 4, 0, time.Millisecond, ""))
	h, _ := s.heatmap("job", 0)
	assert.Equal(t, []int64{4, 5, 6, 7}, h.Steps[1:])
	assert.Len(t, h.Steps, 5)
	s.RecordStep(step("job", 0, 2, 0, time.Millisecond, ""))
	h, _ = s.heatmap("job", 0)
	assert.Equal(t, []int64{3, 4, 5, 6, 7}, h.Steps)

	// max_ranks 8: a ninth rank's steps are dropped.
	for rank := int64(0); rank < 9; rank++ {
		s.RecordStep(step("job", 0, 7, rank, time.Millisecond, ""))
	}
	h, _ = s.heatmap("job", 0)
	assert.Len(t, h.Ranks, 8)

	// max_jobs 4: the least recently updated (job, attempt) goes.
	for a := int64(1); a <= 4; a++ {
		s.RecordStep(step("job", a, 1, 0, time.Millisecond, ""))
	}
	_, ok := s.heatmap("job", 0)
	assert.False(t, ok)
	h, ok = s.heatmap("job", -1)
	require.True(t, ok)
	assert.Equal(t, int64(4), h.Attempt, "without an attempt, the highest")
	assert.Equal(t, 4, s.counts().Jobs)
	assert.Equal(t, []string{"step/old_step", "step/max_ranks", "job/capacity"}, evicted)
	st := s.counts()
	assert.Equal(t, uint64(2), st.DroppedSteps)
	assert.Equal(t, uint64(1), st.EvictedJobs)
}

func TestStoreVerdictInterning(t *testing.T) {
	s := newStore(testLimits(), nil, nil)
	for i := 0; i < 300; i++ {
		s.RecordStep(console.Step{Job: "j", Step: int64(i), Rank: 0, Compute: time.Millisecond, Verdict: fmt.Sprintf("v%d", i)})
	}
	assert.Len(t, s.verdicts, maxVerdicts+1, "\"\", 254 verdicts and other: every index fits a uint8")
	h, ok := s.heatmap("j", 0)
	require.True(t, ok)
	assert.Equal(t, "other", h.Verdicts[h.Cells[0][len(h.Steps)-1].verdict])
	assert.Equal(t, unsafe.Sizeof(cell{}), uintptr(16), "a heatmap cell stays 16 bytes (README's memory bound)")
}

func TestStoreController(t *testing.T) {
	s := newStore(testLimits(), nil, nil)
	_, err := s.controller()
	require.ErrorIs(t, err, console.ErrNoController)
	a, b := consoletest.New(console.Breaker{}), consoletest.New(console.Breaker{})
	s.Attach(a)
	s.Attach(b) // replaces a
	s.Detach(a) // not attached: no effect
	c, err := s.controller()
	require.NoError(t, err)
	assert.Same(t, b, c)
	s.Detach(b)
	_, err = s.controller()
	require.ErrorIs(t, err, console.ErrNoController)
}

// Records from many goroutines with readers alongside (run with -race).
func TestStoreConcurrent(t *testing.T) {
	s := newStore(testLimits(), nil, nil)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				s.RecordFault(fault(fmt.Sprintf("%d-%d", g, i), console.StateOpen, time.Now()))
				s.RecordStep(step(fmt.Sprintf("job-%d", g), 0, int64(i), int64(i%8), time.Millisecond, ""))
				_ = s.listFaults(true)
				_, _ = s.heatmap(fmt.Sprintf("job-%d", g), -1)
				_ = s.listJobs()
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, 100, s.counts().OpenFaults)
}

// The cells of all heatmaps together stay within MaxHeatmapCells: older
// jobs are forgotten first, and a job that alone fills the budget loses
// the cells beyond it.
func TestStoreHeatmapCellBudget(t *testing.T) {
	lim := testLimits()
	lim.MaxJobs, lim.HeatmapSteps, lim.MaxRanks, lim.MaxHeatmapCells = 10, 5, 8, 20
	s := newStore(lim, time.Now, nil)
	for _, job := range []string{"a", "b"} {
		for step := int64(0); step < 2; step++ {
			for rank := int64(0); rank < 8; rank++ {
				s.RecordStep(console.Step{Job: job, Step: step, Rank: rank})
			}
		}
	}
	// a: 16 cells, then b's first 8 make room by forgetting a
	_, ok := s.jobs[jobKey{"a", 0}]
	assert.False(t, ok, "the least recently updated job goes first")
	assert.Equal(t, 16, s.cells)
	s.RecordStep(console.Step{Job: "b", Step: 2, Rank: 0})
	s.RecordStep(console.Step{Job: "b", Step: 2, Rank: 1})
	s.RecordStep(console.Step{Job: "b", Step: 2, Rank: 2})
	s.RecordStep(console.Step{Job: "b", Step: 2, Rank: 3})
	s.RecordStep(console.Step{Job: "b", Step: 2, Rank: 4})
	assert.Equal(t, 20, s.cells, "b alone fills the budget")
	assert.Equal(t, uint64(1), s.stats.DroppedSteps)
	assert.LessOrEqual(t, s.cells, lim.MaxHeatmapCells)
}

// A later record skipped as already decided keeps what remediation did
// about the fault; a later decision that acted replaces it.
func TestStoreKeepsTheDecisionThatActed(t *testing.T) {
	s := newStore(testLimits(), time.Now, nil)
	s.RecordFault(console.Fault{ID: "f1", State: console.StateOpen, Decision: "dry_run", Action: "taint,condition", Reason: "would taint"})
	s.RecordFault(console.Fault{ID: "f1", State: console.StateOpen, Decision: "skipped", Reason: "fault already decided"})
	got := s.faults["f1"].fault
	assert.Equal(t, "dry_run", got.Decision)
	assert.Equal(t, "taint,condition", got.Action)
	s.RecordFault(console.Fault{ID: "f1", State: console.StateOpen, Decision: "failed", Action: "cordon", Reason: "API server down"})
	assert.Equal(t, "failed", s.faults["f1"].fault.Decision)
	s.RecordFault(console.Fault{ID: "f2", State: console.StateOpen, Decision: "skipped", Reason: "no policy rule matched"})
	assert.Equal(t, "skipped", s.faults["f2"].fault.Decision, "a fault never acted on shows why")
}

// Rank ids outside 0..max_ranks-1 (a script's odd numbering) are kept as
// well as the dense ones.
func TestStoreSparseRankIDs(t *testing.T) {
	s := newStore(testLimits(), time.Now, nil)
	for _, r := range []int64{3, 1 << 40, -1, 0} {
		s.RecordStep(console.Step{Job: "j", Step: 1, Rank: r, Compute: time.Duration(r&0xff+1) * time.Millisecond})
	}
	h := s.jobs[jobKey{"j", 0}]
	require.NotNil(t, h)
	assert.Equal(t, []int64{3, 1 << 40, -1, 0}, h.ranks)
	for i, r := range h.ranks {
		idx, ok := h.index(r)
		assert.True(t, ok, "rank %d", r)
		assert.Equal(t, i, idx, "rank %d", r)
	}
	_, ok := h.index(5)
	assert.False(t, ok)
}
