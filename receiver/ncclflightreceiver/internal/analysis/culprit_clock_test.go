package analysis

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"
)

// stepJob is the testbed's data-parallel job (test/testbed): a step every
// period, 4 all-reduces per step that every rank enqueues at the same
// instant of the step (no rank waits for another), a ring of 8 entries. Each rank's node clock is off by clock[rank] (a
// consumer lag or a skew: the testbed shifts both the entries' times and
// the dump's mtime, as a real node's one clock does). At hangStep the
// culprit enqueues nothing; its peers enqueue the step's first all-reduce,
// which stays started. Rank r's dump is written dumpedAt(r) after the job's
// start, on its own clock.
type stepJob struct {
	ranks, steps int
	period       time.Duration
	clock        map[int]time.Duration
	hangStep     int // -1: no hang; the job runs steps steps
	culprit      int
	// stepsOf, when set, is how many steps rank r had recorded when it
	// dumped (a dump written or read at another moment); default all.
	stepsOf  func(r int) int
	dumpedAt func(r int) time.Duration
}

const stepJobColls = 4

func (j stepJob) dumps() []RankDump {
	t0 := time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)
	members := make([]int, j.ranks)
	for r := range members {
		members[r] = r
	}
	out := make([]RankDump, j.ranks)
	for r := range out {
		off := j.clock[r]
		steps := j.steps
		if j.stepsOf != nil {
			steps = j.stepsOf(r)
		}
		var entries []frdump.Entry
		var lastEnq, lastDone int64
		for step := 0; step < steps; step++ {
			start := t0.Add(time.Duration(step) * j.period)
			hang := step == j.hangStep
			for c := range stepJobColls {
				if hang && (c > 0 || r == j.culprit) {
					break
				}
				seq := int64(step*stepJobColls + c + 1)
				created := start.Add(time.Duration(c+1) * j.period / (stepJobColls + 2)).Add(off)
				e := frdump.Entry{
					RecordID: seq - 1, PGName: "0", PGDesc: "default_pg", CollectiveSeqID: seq, OpID: seq,
					ProfilingName: "nccl:all_reduce", TimeCreatedNs: created.UnixNano(),
					InputSizes: [][]int64{{13107200}}, OutputSizes: [][]int64{{13107200}},
					InputDtypes: []string{"BFloat16"}, OutputDtypes: []string{"BFloat16"},
					State: frdump.StateCompleted, Retired: true, TimeoutMs: 600000,
					TimeDiscoveredStartedNs:   created.Add(20 * time.Microsecond).UnixNano(),
					TimeDiscoveredCompletedNs: created.Add(30 * time.Millisecond).UnixNano(),
					DurationMs:                30, HasDuration: true,
				}
				if hang {
					e.State, e.Retired = frdump.StateStarted, false
					e.TimeDiscoveredCompletedNs, e.DurationMs, e.HasDuration = 0, 0, false
				} else {
					lastDone = seq
				}
				lastEnq = seq
				entries = append(entries, e)
			}
		}
		if len(entries) > 8 {
			entries = entries[len(entries)-8:]
		}
		out[r] = RankDump{Rank: r, Dump: &frdump.Dump{
			Version:    frdump.Newest,
			PGConfig:   map[string]frdump.PGConfig{"0": {Name: "0", Desc: "default_pg", Ranks: members}},
			PGStatus:   map[string]frdump.PGStatus{"0": {LastEnqueued: lastEnq, LastStarted: lastEnq, LastCompleted: lastDone}},
			Entries:    entries,
			DumpedAtNs: t0.Add(j.dumpedAt(r)).Add(off).UnixNano(),
		}}
	}
	return out
}

// clocks: consumer lag (10 minutes behind) and ±2 minute skews.
func skewedClocks(ranks int) map[int]time.Duration {
	offs := []time.Duration{0, 2 * time.Minute, -2 * time.Minute, -10 * time.Minute}
	out := map[int]time.Duration{}
	for r := range ranks {
		out[r] = offs[r%len(offs)]
	}
	return out
}

func namesOnly(t *testing.T, fs []Finding, want []int) {
	t.Helper()
	for _, f := range fs {
		for _, r := range f.Ranks {
			assert.Contains(t, want, r, "%s names rank %d:\n%s", f.Kind, r, describe(fs))
		}
	}
}

// A hang on nodes whose clocks are off (10 minutes of lag, ±2 minutes of
// skew), each dump's time taken on its own node's clock: the analysis
// compares a rank's dump with its own enqueues only, so the culprit is
// named once it enqueued nothing for StallAfter, and no one else is.
func TestHangCulpritWithSkewedConsistentClocks(t *testing.T) {
	period := time.Second
	opts := Options{StallAfter: 5 * period}
	job := stepJob{ranks: 8, steps: 17, period: period, clock: skewedClocks(8), hangStep: 16, culprit: 2}

	// Dumped as the hang step ends: nobody stopped yet. The collective
	// the culprit never enqueued is a missing_ranks finding (states are
	// known) with its pg_status divergence, and no hang.
	job.dumpedAt = func(int) time.Duration { return 17 * period }
	rep := Analyze(job.dumps(), opts)
	require.Equal(t, []Kind{KindMissingRanks, KindPGStatusDivergence}, kinds(rep.Findings), describe(rep.Findings))
	namesOnly(t, rep.Findings, []int{2})

	// Dumped again 8 steps on (the testbed rewrites a stopped job's dumps):
	// the culprit, idle for 8 s, is the hang's only rank.
	job.dumpedAt = func(int) time.Duration { return 25 * period }
	rep = Analyze(job.dumps(), opts)
	require.Equal(t, []Kind{KindHang}, kinds(rep.Findings), describe(rep.Findings))
	h := rep.Findings[0]
	assert.Equal(t, []int{2}, h.Ranks)
	assert.Equal(t, int64(16*stepJobColls+1), h.Seq)
	assert.Equal(t, "nccl:all_reduce", h.ProfilingName)
	assert.Contains(t, h.Evidence[rankKey(2, EvidenceStuckCollective)], "entered by {0, 1, 3, 4, 5, 6, 7}")
	assert.Equal(t, "9.3", h.Evidence[rankKey(2, "idle_s")], "idle on its own clock (newest enqueue at 15.67 s, dump at 25 s)")
}

// Dumps read at different moments: ranks 3 and 7 (on a node 10 minutes
// behind) were read one step before the others, each dump's time on its
// own node's clock. A rank read one step behind was still running when it
// dumped, so no hang names it; mid-collective (peers started the step's
// first all-reduce, the ranks read behind had not) a missing_ranks finding
// names them, bystanders both, which is why that finding opens only the
// job's fault.
func TestDumpsReadAtDifferentMomentsNameNoOne(t *testing.T) {
	period := time.Second
	opts := Options{StallAfter: 5 * period}
	behind := map[int]bool{3: true, 7: true}
	job := stepJob{ranks: 8, steps: 20, period: period, clock: skewedClocks(8), hangStep: -1, culprit: -1,
		stepsOf: func(r int) int {
			if behind[r] {
				return 19
			}
			return 20
		},
		dumpedAt: func(r int) time.Duration {
			if behind[r] {
				return 19 * period
			}
			return 20 * period
		},
	}
	rep := Analyze(job.dumps(), opts)
	for _, f := range rep.Findings {
		assert.NotEqual(t, KindHang, f.Kind, describe(rep.Findings))
		assert.NotEqual(t, KindMissingRanks, f.Kind, describe(rep.Findings))
	}
	namesOnly(t, rep.Findings, []int{3, 7}) // at most the divergence of the ranks read behind

	job.hangStep = 19
	ds := job.dumps()
	rep = Analyze(ds, opts)
	for _, f := range rep.Findings {
		assert.NotEqual(t, KindHang, f.Kind, describe(rep.Findings))
	}
	require.Contains(t, kinds(rep.Findings), KindMissingRanks)
	namesOnly(t, rep.Findings, []int{3, 7})

	// The testbed's bug (issue 20): the entries on the node's clock (10
	// minutes behind), the dumps' times on the reader's. Ranks 3 and 7
	// then look idle for 10 minutes: two bystanders named as culprits.
	for _, d := range ds {
		d.Dump.DumpedAtNs -= int64(job.clock[d.Rank])
	}
	rep = Analyze(ds, opts)
	require.Contains(t, kinds(rep.Findings), KindHang, "the check above is not vacuous")
	for _, f := range rep.Findings {
		if f.Kind == KindHang {
			assert.Equal(t, []int{3, 7}, f.Ranks)
		}
	}
}

// Ties: every rank enqueues each collective at the same instant. Nobody
// was last, so nobody is a straggler, whatever order the ranks are scored
// in; and when the whole job stops after all ranks entered the same
// collective at the same instant (no rank behind), nobody is a culprit.
func TestTiesNameNoOne(t *testing.T) {
	period := time.Second
	opts := Options{StallAfter: 5 * period}
	same := map[int]time.Duration{}
	job := stepJob{ranks: 8, steps: 12, period: period, clock: same, hangStep: -1,
		dumpedAt: func(int) time.Duration { return 12 * period }}
	rep := Analyze(job.dumps(), opts)
	assert.Empty(t, rep.Findings, describe(rep.Findings))

	// Two ranks tied for last in every collective, 40 ms behind the others
	// (who wait for both): neither was the one everyone waited for, and
	// the first of them in rank order is not named for the tie (the
	// check alone, without the spread bound that also protects here).
	ds := lateRanks(job, 5, 6)
	for _, f := range Analyze(ds, Options{}).Findings {
		assert.NotEqual(t, KindStraggler, f.Kind, describe([]Finding{f}))
	}
	al := alignDumps(ds)
	require.Len(t, al.groups, 1)
	_, named := findStraggler(al.groups[0], Options{StragglerMinShare: 0.01, StragglerLagFactor: 1e-9}.withDefaults())
	assert.False(t, named, "ranks tied for last")

	// The whole job stopped inside the same collective, dumped 8 s on.
	job.steps, job.hangStep, job.culprit = 13, 12, -1
	job.dumpedAt = func(int) time.Duration { return 21 * period }
	rep = Analyze(job.dumps(), opts)
	for _, f := range rep.Findings {
		assert.NotEqual(t, KindHang, f.Kind, describe(rep.Findings))
		assert.NotEqual(t, KindStraggler, f.Kind, describe(rep.Findings))
		assert.Empty(t, f.Ranks, "%s names %v", f.Kind, f.Ranks)
	}
}

// lateRanks is job's dumps with the given ranks enqueuing 40 ms after the
// others, which wait for them: the collectives complete when the late
// ranks join (the others' durations 70 ms, theirs 30 ms).
func lateRanks(job stepJob, late ...int) []RankDump {
	job.clock = map[int]time.Duration{}
	for _, r := range late {
		job.clock[r] = 40 * time.Millisecond
	}
	ds := job.dumps()
	for i := range ds {
		if _, ok := job.clock[ds[i].Rank]; ok {
			continue
		}
		for k := range ds[i].Dump.Entries {
			e := &ds[i].Dump.Entries[k]
			e.DurationMs = 70
			e.TimeDiscoveredCompletedNs = e.TimeCreatedNs + int64(70*time.Millisecond)
		}
	}
	return ds
}

// One rank enqueues later than its tied peers: it is last in every
// collective, so the tie rule does not hide a real straggler.
func TestTieRuleKeepsARealStraggler(t *testing.T) {
	job := stepJob{ranks: 8, steps: 20, period: time.Second, hangStep: -1,
		dumpedAt: func(int) time.Duration { return 20 * time.Second }}
	// The generator's dumps keep a ring of 8 entries: below the default
	// StragglerMinCollectives (16), which a real dump's hundreds exceed.
	rep := Analyze(lateRanks(job, 5), Options{StragglerMinCollectives: 5})
	var stragglers []string
	for _, f := range rep.Findings {
		if f.Kind == KindStraggler {
			stragglers = append(stragglers, strconv.Itoa(f.Ranks[0]))
		}
	}
	assert.Equal(t, []string{"5"}, stragglers, describe(rep.Findings))
}
