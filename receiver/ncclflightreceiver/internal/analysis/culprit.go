package analysis

import (
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"
)

// The culprit of a hang, across every process group of a job.
//
// A job that runs tensor, pipeline, expert and data parallelism at once has
// a dozen process groups, and every rank is in several. When ranks stop
// (a GPU error; a Python thread holding the GIL), each group that holds one
// of them gets stuck, their peers keep enqueuing for a while and then block,
// and the per-group checks name whole halves of the job as behind. What an
// operator needs is the ranks all stuck groups wait for. The rule:
//
//   - A rank's progress in a group is the newest collective it enqueued
//     there: the larger of pg_status' last_enqueued_collective and the
//     newest collective_seq_id of its entries (no start or completion time
//     is needed: every entry may be `scheduled`). Point-to-point operations
//     carry no sequence shared across ranks and are not compared.
//   - A group is diverged when its members' progress differs. Groups that
//     hold ranks of different pipeline stages (two ranks that exchange
//     point-to-point operations, as pipeline neighbours do) differ by the
//     schedule, a stage running microbatches ahead of the next: they are
//     left out, and so is the default group in a pipeline-parallel job.
//   - A rank stopped when its dump was written at least StallAfter after its
//     newest enqueue (the dump's DumpedAtNs, the file's mtime, against the
//     rank's own newest time_created_ns: one clock). A rank still enqueuing
//     when it dumped was running: what it lacks it had not reached yet, so a
//     dump taken a few collectives earlier than another's names no one. When
//     every entry is `scheduled` (no start or completion seen), the
//     missing_ranks and pg_status_divergence findings of ranks that were
//     running are dropped for that reason; where the watchdog records
//     states, a collective started and never completed is evidence enough
//     and they stay.
//   - A rank alive but stuck (a thread holding the Python GIL) may write a
//     dump with no entries at all: dumps that hold only the operations in
//     flight (as NVIDIA's resiliency extension has torch write them) have
//     none for a rank whose every collective completed and that enqueued no
//     other. Such a silent rank is a candidate when its peers in a group
//     that pg_config says it belongs to wait there (they enqueued a
//     collective that no member completed) and are not seen running.
//   - Where no rank is seen running (no dump moment known, or every rank
//     idle: the watchdog's dumps of a hang, but also the file times of a
//     copy) and no entry records a state, the moments cannot tell a rank
//     that stopped from one dumped a moment earlier: a rank behind in a
//     diverged group, or silent, is a candidate only where the dumps show
//     the stop (evidence.go: its peers went on past the collective it never
//     entered, and it holds nothing in flight or its watchdog missed
//     completions its peers saw); without a hang, the per-group findings
//     are no evidence either and are dropped. Where only some dump moments
//     are unknown, a rank without one that is behind in every group it
//     shares with others (at least two, within a stage), and whose peers
//     wait in one of them for a collective it never enqueued, is a
//     candidate: a dump merely taken earlier is behind in the groups its
//     program was crossing at that moment, not in all of them.
//   - A culprit is a candidate that is behind in at least one diverged
//     group (or silent), and in every diverged group it is in, every other
//     member that is not itself a culprit is ahead of it. A rank ahead of
//     another member in a group (it entered a collective a member never
//     entered) waits there: it is no culprit, wherever else it is behind
//     (a rank blocked in the expert all_to_all of a culprit is behind its
//     tensor peer, which went on to the next tensor all_reduce; ranks of
//     one stage run one program, so a stopped rank is never ahead of one
//     that waits for it). A rank behind a collective
//     that completed anywhere joined it (it could not complete otherwise):
//     its dump is merely older, whatever its clock says, and it is no
//     culprit. Ranks that block waiting for a
//     culprit are ahead of it in the group they share with it, so they are
//     not named; the culprits are found as the largest set that satisfies
//     the rule (ranks are removed until none violates it).
//
// The culprits go into one job-level finding (kind hang, hang.go), the
// report's headline.

// KindHang is declared with the other kinds in analysis.go.

// progress is one group's progress per rank.
type progress struct {
	name, desc string
	id         int64
	last       map[int]int64 // rank → newest collective enqueued
	lo, hi     int64
	// completed is the newest collective any rank saw complete (an entry
	// `completed`, or pg_status' last_completed_collective); -1 when none.
	completed int64
	// members are the group's ranks from pg_config (any dump's); nil when
	// no dump lists them.
	members []int
}

// waiting: some member enqueued a collective that no member completed.
func (p *progress) waiting() bool { return len(p.last) > 0 && p.hi > p.completed }

func (p *progress) hasMember(r int) bool {
	for _, m := range p.members {
		if m == r {
			return true
		}
	}
	return false
}

func (p *progress) diverged() bool { return len(p.last) >= 2 && p.hi > p.lo }

// stagePairs returns the pairs of ranks that exchange point-to-point
// operations (pipeline neighbours: ranks of different stages), from the
// profiling names of p2p entries ("nccl:send 0->1", "nccl:recv 1<-0", ranks
// local to the group) and the group's members in pg_config order. Dumps of
// the operations in flight hold the point-to-point operations of some
// pipeline groups only: every group of a kind (a description several
// groups share, e.g. PIPELINE_MODEL_PARALLEL_GROUP) one of which carries
// them pairs its members too.
func stagePairs(al *aligned) map[[2]int]bool {
	out := map[[2]int]bool{}
	p2pDescs := map[string]bool{}
	for _, v := range al.views {
		for i := range v.r.Ops {
			e := &v.r.Ops[i]
			if !isP2P(e) {
				continue
			}
			a, b, ok := p2pLocalRanks(e.ProfilingName)
			if !ok {
				continue
			}
			cfg, ok := v.r.PGConfig[groupName(e)]
			if !ok || a >= len(cfg.Ranks) || b >= len(cfg.Ranks) || a == b {
				continue
			}
			x, y := cfg.Ranks[a], cfg.Ranks[b]
			out[[2]int{min(x, y), max(x, y)}] = true
			p2pDescs[cfg.Desc] = true
		}
	}
	configs := allConfigs(al)
	kinds := map[string]int{}
	for _, cfg := range configs {
		kinds[cfg.Desc]++
	}
	for _, cfg := range configs {
		if !p2pDescs[cfg.Desc] || kinds[cfg.Desc] < 2 || cfg.Desc == "" || cfg.Desc == "undefined" {
			continue
		}
		for i, x := range cfg.Ranks {
			for _, y := range cfg.Ranks[i+1:] {
				if x != y {
					out[[2]int{min(x, y), max(x, y)}] = true
				}
			}
		}
	}
	return out
}

// p2pLocalRanks reads the two group-local ranks of "nccl:send 0->1" or
// "nccl:recv 1<-0".
func p2pLocalRanks(name string) (a, b int, ok bool) {
	_, op, _ := strings.Cut(name, ":")
	_, ends, found := strings.Cut(op, " ")
	if !found {
		return 0, 0, false
	}
	sep := "->"
	if strings.Contains(ends, "<-") {
		sep = "<-"
	}
	x, y, found := strings.Cut(ends, sep)
	if !found {
		return 0, 0, false
	}
	a, err1 := strconv.Atoi(strings.TrimSpace(x))
	b, err2 := strconv.Atoi(strings.TrimSpace(y))
	if err1 != nil || err2 != nil || a < 0 || b < 0 {
		return 0, 0, false
	}
	return a, b, true
}

// crossStage reports whether g holds ranks of different pipeline stages
// (two members, by progress or by pg_config, that exchange point-to-point
// operations): their progress differs by the schedule (a stage runs
// microbatches ahead of the next), so it says nothing about who stopped.
func (p *progress) crossStage(pairs map[[2]int]bool) bool {
	for pair := range pairs {
		_, a := p.last[pair[0]]
		_, b := p.last[pair[1]]
		a = a || p.hasMember(pair[0])
		b = b || p.hasMember(pair[1])
		if a && b {
			return true
		}
	}
	return false
}

// withinStage keeps the groups whose members run the same program.
func withinStage(groups []*progress, pairs map[[2]int]bool) []*progress {
	out := groups[:0:0]
	for _, g := range groups {
		if !g.crossStage(pairs) {
			out = append(out, g)
		}
	}
	return out
}

// rankTimes is when each rank last enqueued and dumped.
type rankTimes struct {
	newest, dumped int64
	// silent: the rank's dump holds no entries.
	silent bool
}

// known reports whether both times are known.
func (t rankTimes) known() bool { return t.newest > 0 && t.dumped > 0 }

func (t rankTimes) idle() time.Duration { return time.Duration(t.dumped - t.newest) }

// stopped: the rank enqueued nothing for at least stall before it dumped.
func (t rankTimes) stopped(stall time.Duration) bool { return t.known() && t.idle() >= stall }

// running: the rank was still enqueuing when it dumped.
func (t rankTimes) running(stall time.Duration) bool { return t.known() && t.idle() < stall }

func timesOf(al *aligned) map[int]rankTimes {
	out := make(map[int]rankTimes, len(al.views))
	for _, v := range al.views {
		t := rankTimes{dumped: v.r.DumpedAtNs, silent: len(v.r.Ops) == 0}
		for i := range v.r.Ops {
			t.newest = max(t.newest, v.r.Ops[i].TimeCreatedNs)
		}
		out[v.rank] = t
	}
	return out
}

// groupProgress collects every group's progress per rank, sorted by name.
func groupProgress(al *aligned) []*progress {
	byName := map[string]*progress{}
	get := func(id int64, name, desc string) *progress {
		p := byName[name]
		if p == nil {
			p = &progress{name: name, desc: desc, id: id, last: map[int]int64{}, completed: -1}
			byName[name] = p
		}
		if p.desc == "" {
			p.desc = desc
		}
		return p
	}
	see := func(p *progress, rank int, seq int64) {
		if old, ok := p.last[rank]; !ok || seq > old {
			p.last[rank] = seq
		}
	}
	for _, v := range al.views {
		for key, st := range v.status {
			id, name, desc := resolveGroup(al, key)
			p := get(id, name, desc)
			see(p, v.rank, st.LastEnqueued)
			p.completed = max(p.completed, st.LastCompleted)
		}
		for i := range v.r.Ops {
			e := &v.r.Ops[i]
			if isP2P(e) {
				continue
			}
			p := get(e.PGID, groupName(e), e.PGDesc)
			see(p, v.rank, e.CollectiveSeqID)
			if e.State == frdump.StateCompleted {
				p.completed = max(p.completed, e.CollectiveSeqID)
			}
		}
	}
	out := make([]*progress, 0, len(byName))
	for _, p := range byName {
		p.members = expectedRanks(p.name, al.views)
		first := true
		for _, s := range p.last {
			if first {
				p.lo, p.hi, first = s, s, false
			}
			p.lo, p.hi = min(p.lo, s), max(p.hi, s)
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// findCulprits returns the culprit ranks, ascending.
func findCulprits(al *aligned, groups []*progress, times map[int]rankTimes, stall time.Duration) []int {
	// Where no rank was seen running (every dump moment unknown, or every
	// rank idle: the watchdog's dumps of a hang, but also a copy's file
	// times), the moments cannot tell a rank that stopped from one whose
	// dump was taken a moment earlier: the dumps must show it (evidence.go).
	// Where the watchdog records states, a collective started and never
	// completed says more, and the rules below hold as they are.
	blind := noneRunning(times, stall) && !stateKnown(al)
	stoppedOrBlind := func(r int) bool { return times[r].stopped(stall) || (blind && !times[r].known()) }
	culprit := map[int]bool{}
	stale := map[int]bool{}
	for _, g := range groups {
		for r, s := range g.last {
			if g.diverged() && s < g.hi && stoppedOrBlind(r) {
				culprit[r] = true
			}
			if s < g.completed || (g.diverged() && s > g.lo) {
				stale[r] = true // or waiting: it entered what a member never did
			}
		}
	}
	for r, t := range times {
		switch {
		case t.running(stall):
		case t.silent && silentHoldsUp(r, groups, times, stall):
			culprit[r] = true
		case !blind && !t.silent && !t.known() && behindEverywhere(r, groups):
			culprit[r] = true
		}
	}
	for r := range stale {
		delete(culprit, r)
	}
	if blind {
		for r := range culprit {
			if !stoppedHere(al, r, groups) {
				delete(culprit, r)
			}
		}
	}
	for changed := true; changed; {
		changed = false
		for r := range culprit {
			if !holdsUp(r, groups, culprit) {
				delete(culprit, r)
				changed = true
			}
		}
	}
	out := make([]int, 0, len(culprit))
	for r := range culprit {
		out = append(out, r)
	}
	sort.Ints(out)
	return out
}

// silentHoldsUp: silent rank r belongs (pg_config) to a group in which it
// has no progress of its own and whose members wait, one of them not seen
// running.
func silentHoldsUp(r int, groups []*progress, times map[int]rankTimes, stall time.Duration) bool {
	for _, g := range groups {
		if _, in := g.last[r]; in || !g.hasMember(r) || !g.waiting() {
			continue
		}
		for m, s := range g.last {
			if m != r && s > g.completed && !times[m].running(stall) {
				return true
			}
		}
	}
	return false
}

// behindEverywhere: r is behind in every group it shares with another
// member that has progress (at least two), and in one of them the first
// collective it never enqueued completed nowhere (its peers wait there).
func behindEverywhere(r int, groups []*progress) bool {
	shared, waitedFor := 0, false
	for _, g := range groups {
		mine, in := g.last[r]
		if !in || len(g.last) < 2 {
			continue
		}
		if mine >= g.hi {
			return false
		}
		shared++
		waitedFor = waitedFor || mine+1 > g.completed
	}
	return shared >= 2 && waitedFor
}

// holdsUp: in every diverged group of r, every other member that is not a
// culprit is ahead of r.
func holdsUp(r int, groups []*progress, culprit map[int]bool) bool {
	for _, g := range groups {
		mine, in := g.last[r]
		if !in || !g.diverged() {
			continue
		}
		for m, s := range g.last {
			if m != r && !culprit[m] && s <= mine {
				return false
			}
		}
	}
	return true
}

// allConfigs is every group pg_config lists in any dump, by name.
func allConfigs(al *aligned) map[string]frdump.PGConfig {
	out := map[string]frdump.PGConfig{}
	for _, v := range al.views {
		for name, cfg := range v.r.PGConfig {
			if _, ok := out[name]; !ok {
				out[name] = cfg
			}
		}
	}
	return out
}
