package analysis

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
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
//   - A culprit is a rank that stopped, is behind in at least one diverged
//     group, and in every diverged group it is in, every other member that
//     is not itself a culprit is ahead of it. A rank behind a collective
//     that completed anywhere joined it (it could not complete otherwise):
//     its dump is merely older, whatever its clock says, and it is no
//     culprit. Ranks that block waiting for a
//     culprit are ahead of it in the group they share with it, so they are
//     not named; the culprits are found as the largest set that satisfies
//     the rule (ranks are removed until none violates it).
//
// The culprits go into one job-level finding (kind hang) with, per culprit,
// the groups it stopped in, the first collective there it never enqueued
// (sequence id, op, the ranks that did), its idle time and the Python stack
// of its newest entry. The missing_ranks and pg_status_divergence findings
// the hang explains (their ranks all stopped) are folded into its evidence:
// one incident, one finding. Without dump times nothing is called stopped
// and the per-group findings are reported as before.

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
}

func (p *progress) diverged() bool { return len(p.last) >= 2 && p.hi > p.lo }

// stagePairs returns the pairs of ranks that exchange point-to-point
// operations (pipeline neighbours: ranks of different stages), from the
// profiling names of p2p entries ("nccl:send 0->1", "nccl:recv 1<-0", ranks
// local to the group) and the group's members in pg_config order.
func stagePairs(al *aligned) map[[2]int]bool {
	out := map[[2]int]bool{}
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

// crossStage reports whether g holds ranks of different pipeline stages:
// their progress differs by the schedule (a stage runs microbatches ahead
// of the next), so it says nothing about who stopped.
func (p *progress) crossStage(pairs map[[2]int]bool) bool {
	for pair := range pairs {
		_, a := p.last[pair[0]]
		_, b := p.last[pair[1]]
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
		t := rankTimes{dumped: v.r.DumpedAtNs}
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
		for key, st := range v.r.PGStatus {
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

// findCulprits returns the culprit ranks, ascending, and the diverged groups.
func findCulprits(groups []*progress, times map[int]rankTimes, stall time.Duration) []int {
	culprit := map[int]bool{}
	stale := map[int]bool{}
	for _, g := range groups {
		if !g.diverged() {
			continue
		}
		for r, s := range g.last {
			if s < g.hi && times[r].stopped(stall) {
				culprit[r] = true
			}
			if s < g.completed {
				stale[r] = true
			}
		}
	}
	for r := range stale {
		delete(culprit, r)
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

// stuckAt is one group a culprit stopped in.
type stuckAt struct {
	g       *progress
	mine    int64
	op      string
	entered []int
}

func (s stuckAt) text() string {
	next := s.mine + 1
	op := s.op
	if op == "" {
		op = "unknown collective"
	}
	return fmt.Sprintf("pg %s seq %d %s (last enqueued %d; entered by %s)",
		groupInfo(s.g.name, s.g.desc), next, op, s.mine, rankSet(s.entered))
}

func stuckGroups(al *aligned, r int, groups []*progress) []stuckAt {
	var out []stuckAt
	for _, g := range groups {
		mine, in := g.last[r]
		if !in || !g.diverged() || mine >= g.hi {
			continue
		}
		s := stuckAt{g: g, mine: mine, op: profilingNameOf(al, g.name, mine+1)}
		for m, seq := range g.last {
			if seq > mine {
				s.entered = append(s.entered, m)
			}
		}
		sort.Ints(s.entered)
		out = append(out, s)
	}
	return out
}

// maxStackFrames and maxStackChars bound the Python stack quoted as evidence.
const (
	maxStackFrames = 16
	maxStackChars  = 2000
)

// stackText renders frames, "name (file:line)", innermost as the dump
// lists them, joined by "; ", within maxStackFrames and
// maxStackChars; "" when there are none (JSON dumps hold no frames).
func stackText(frames []frdump.Frame) string {
	var b strings.Builder
	for i, f := range frames {
		if i == maxStackFrames {
			fmt.Fprintf(&b, "; ... %d more", len(frames)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s (%s:%d)", f.Name, f.Filename, f.Line)
		if b.Len() > maxStackChars {
			break
		}
	}
	s := b.String()
	if len(s) > maxStackChars {
		s = s[:maxStackChars] + "..."
	}
	return s
}

// maxStackRanks bounds the ranks whose stack one missing_ranks or timeout
// finding quotes: a collective thousands of ranks entered must not make a
// log record of megabytes, and the stacks of one collective's ranks are
// mostly the same.
const maxStackRanks = 8

// hangFinding builds the job-level finding naming the culprits.
func hangFinding(al *aligned, culprits []int, groups []*progress, times map[int]rankTimes) (Finding, bool) {
	ev := map[string]string{"culprit_ranks": rankSet(culprits)}
	var b strings.Builder
	fmt.Fprintf(&b, "Hang: ranks %s stopped; the process groups stuck wait for them\n", rankSet(culprits))
	var f Finding
	first := true
	stuckCount := map[string]bool{}
	for _, r := range culprits {
		stuck := stuckGroups(al, r, groups)
		if len(stuck) == 0 {
			continue
		}
		t := times[r]
		idle := strconv.FormatFloat(t.idle().Seconds(), 'f', 1, 64)
		ev[rankKey(r, "idle_s")] = idle
		fmt.Fprintf(&b, "rank %d: nothing enqueued for %s s before its dump; behind in %d process groups\n", r, idle, len(stuck))
		texts := make([]string, len(stuck))
		for i, s := range stuck {
			texts[i] = s.text()
			stuckCount[s.g.name] = true
			ev[rankKey(r, "pg."+s.g.name+".last_enqueued_collective")] = strconv.FormatInt(s.mine, 10)
			ev["pg."+s.g.name+".last_enqueued_collective_max"] = strconv.FormatInt(s.g.hi, 10)
			fmt.Fprintf(&b, "  %s\n", texts[i])
			if first {
				first = false
				f = Finding{Kind: KindHang, PGID: s.g.id, PGName: s.g.name, PGDesc: s.g.desc,
					Seq: s.mine + 1, ProfilingName: s.op}
			}
		}
		ev[rankKey(r, EvidenceStuckCollective)] = strings.Join(texts, "; ")
		if v := viewOf(al, r); v != nil {
			if st := v.r.NewestStack; st != "" {
				ev[rankKey(r, EvidencePythonStack)] = st
				fmt.Fprintf(&b, "  python stack: %s\n", st)
			}
		}
	}
	if first {
		return Finding{}, false
	}
	ev["stuck_groups"] = strconv.Itoa(len(stuckCount))
	f.Ranks = culprits
	f.Evidence = ev
	f.Message = strings.TrimSuffix(b.String(), "\n")
	return f, true
}

func viewOf(al *aligned, rank int) *rankView {
	for _, v := range al.views {
		if v.rank == rank {
			return v
		}
	}
	return nil
}

// Evidence keys of a hang finding, per culprit (rank.<r>.<key>): the
// collectives it never enqueued while its peers did, and the Python stack
// of its newest entry. The correlator quotes both in the fault.
const (
	EvidenceStuckCollective = semconv.NCCLEvidenceStuckCollective
	EvidencePythonStack     = semconv.NCCLEvidencePythonStack
)

// culpritPass runs the culprit analysis over the findings of the per-group
// checks: it drops those of ranks that were running when they dumped, and
// folds those a hang explains into the hang's finding.
func culpritPass(al *aligned, findings []Finding, opts Options) []Finding {
	times := timesOf(al)
	stall := opts.StallAfter
	// A missing or behind rank that was still enqueuing when it dumped had
	// not reached the collective yet. Only where no entry says more than
	// `scheduled`: where the watchdog records starts and completions, a
	// collective its peers started and none completed is evidence of its
	// own (findMissingRanks), whenever the dumps were taken.
	kept := findings[:0]
	scheduledOnly := !stateKnown(al)
	for _, f := range findings {
		if scheduledOnly && (f.Kind == KindMissingRanks || f.Kind == KindPGStatusDivergence) && allRunning(f.Ranks, times, stall) {
			continue
		}
		kept = append(kept, f)
	}
	findings = kept

	groups := withinStage(groupProgress(al), stagePairs(al))
	culprits := findCulprits(groups, times, stall)
	if len(culprits) == 0 {
		return findings
	}
	hang, ok := hangFinding(al, culprits, groups, times)
	if !ok {
		return findings
	}
	var folded []string
	kept = findings[:0]
	for _, f := range findings {
		if (f.Kind == KindMissingRanks || f.Kind == KindPGStatusDivergence) && allStopped(f.Ranks, times, stall) {
			folded = append(folded, f.Key().String())
			continue
		}
		kept = append(kept, f)
	}
	if len(folded) > 0 {
		hang.Evidence["folded_findings"] = strings.Join(folded, ", ")
		hang.Message += "\nexplains: " + strings.Join(folded, ", ")
	}
	return append(kept, hang)
}

// stateKnown reports whether any entry of any dump was seen started or
// completed by the watchdog.
func stateKnown(al *aligned) bool {
	for _, v := range al.views {
		for i := range v.r.Ops {
			if st := v.r.Ops[i].State; st != "" && st != frdump.StateScheduled {
				return true
			}
		}
	}
	return false
}

func allRunning(ranks []int, times map[int]rankTimes, stall time.Duration) bool {
	for _, r := range ranks {
		if !times[r].running(stall) {
			return false
		}
	}
	return len(ranks) > 0
}

func allStopped(ranks []int, times map[int]rankTimes, stall time.Duration) bool {
	for _, r := range ranks {
		if !times[r].stopped(stall) {
			return false
		}
	}
	return true
}
