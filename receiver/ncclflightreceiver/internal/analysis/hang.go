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

// The hang finding: one per incident, the report's headline.
//
// It names the culprits (culprit.go) and the collective the job is stuck
// in, as NVIDIA's reference analyzer does: the process group (name and
// description), the first collective there the culprits never entered
// (sequence id, op, sizes, dtypes as the lowest rank that entered it
// recorded them) and the ranks that entered it. A culprit that stopped in
// several groups has one such collective in each; the job is stuck in the
// one its peers enqueued first (the earliest enqueue of any rank that
// entered it: the others were enqueued by ranks that went on enqueuing
// asynchronously before they blocked). Per culprit, the evidence lists
// every collective it never entered, in that order, its idle time and the
// Python stack of its newest entry. Every missing_ranks and
// pg_status_divergence finding of the job is a consequence (the groups
// that hold a culprit are stuck, and the ranks blocked behind it stopped at
// different points): they are folded under the hang (Finding.Folded), and
// the report holds one finding per incident besides mismatches, timeouts
// and stragglers.

// StuckCollective is the collective a hang's culprits never entered.
type StuckCollective struct {
	// PGName is the process group's name (pg_config's key, the same on
	// every rank); PGDesc its description (e.g. EXPERT_MODEL_PARALLEL_GROUP).
	PGName, PGDesc string
	// PGID is the pg_id of the entry quoted: each rank numbers its groups
	// itself, so it is that rank's id of the group, not the group's name.
	PGID int64
	// Seq is the collective_seq_id the culprits never enqueued.
	Seq int64
	// ProfilingName is the op, e.g. nccl:all_to_all; "" when no rank's
	// dump still holds the entry.
	ProfilingName string
	// InputSizes, OutputSizes, InputDtypes and OutputDtypes are the entry's
	// as the lowest rank that entered it recorded them (sizes of an uneven
	// all_to_all differ per rank).
	InputSizes, OutputSizes   [][]int64
	InputDtypes, OutputDtypes []string
	// Entered are the members that enqueued it; Missing the culprits that
	// did not (ascending).
	Entered, Missing []int
	// EnqueuedNs is the earliest time_created_ns of the ranks that entered
	// it (0 when unknown).
	EnqueuedNs int64
}

// Sizes renders the input sizes as the reference analyzer does: 2048x5120,
// several tensors separated by ", ".
func (s *StuckCollective) Sizes() string { return sizesText(s.InputSizes) }

// Dtype renders the input dtypes: BFloat16, several separated by ", ".
func (s *StuckCollective) Dtype() string { return strings.Join(s.InputDtypes, ", ") }

// String is one line: "pg 72:EXPERT_MODEL_PARALLEL_GROUP seq 45265
// nccl:all_to_all 2048x5120 BFloat16".
func (s *StuckCollective) String() string {
	op := s.ProfilingName
	if op == "" {
		op = "unknown collective"
	}
	out := fmt.Sprintf("pg %s seq %d %s", groupInfo(s.PGName, s.PGDesc), s.Seq, op)
	if sz := s.Sizes(); sz != "" {
		out += " " + sz
	}
	if dt := s.Dtype(); dt != "" {
		out += " " + dt
	}
	return out
}

func sizesText(sizes [][]int64) string {
	parts := make([]string, 0, len(sizes))
	for _, dims := range sizes {
		ds := make([]string, len(dims))
		for i, d := range dims {
			ds[i] = strconv.FormatInt(d, 10)
		}
		parts = append(parts, strings.Join(ds, "x"))
	}
	return strings.Join(parts, ", ")
}

// stuckAt is one group a culprit stopped in.
type stuckAt struct {
	g    *progress
	mine int64 // the culprit's last collective there
	sc   StuckCollective
}

func (s stuckAt) text() string {
	return fmt.Sprintf("%s (last enqueued %d; entered by %s)", s.sc.String(), s.mine, rankSet(s.sc.Entered))
}

// stuckGroups returns the groups r stopped in, the earliest enqueued
// first: the diverged groups where it is behind, and, for a rank with no
// progress of its own in a group pg_config puts it in, the groups whose
// members wait (it never entered the first collective none completed).
func stuckGroups(al *aligned, r int, groups []*progress) []stuckAt {
	var out []stuckAt
	for _, g := range groups {
		mine, in := g.last[r]
		switch {
		case in && g.diverged() && mine < g.hi:
		case !in && g.hasMember(r) && g.waiting():
			mine = g.completed
			if mine < 0 { // nothing completed: the first collective a member holds
				lo, ok := lowestHeld(al, g.name)
				if !ok {
					continue
				}
				mine = lo - 1
			}
		default:
			continue
		}
		s := stuckAt{g: g, mine: mine, sc: StuckCollective{PGName: g.name, PGDesc: g.desc, PGID: g.id, Seq: mine + 1}}
		for m, seq := range g.last {
			if seq > mine {
				s.sc.Entered = append(s.sc.Entered, m)
			}
		}
		sort.Ints(s.sc.Entered)
		if e, at := entryOf(al, g.name, mine+1); e != nil {
			s.sc.PGID, s.sc.ProfilingName = e.PGID, e.ProfilingName
			s.sc.InputSizes, s.sc.OutputSizes = e.InputSizes, e.OutputSizes
			s.sc.InputDtypes, s.sc.OutputDtypes = e.InputDtypes, e.OutputDtypes
			s.sc.EnqueuedNs = at
		}
		out = append(out, s)
	}
	sortStuck(out)
	return out
}

// sortStuck orders stuck collectives by their earliest enqueue, unknown
// ones last, then by group name.
func sortStuck(s []stuckAt) {
	sort.SliceStable(s, func(i, j int) bool {
		a, b := s[i].sc.EnqueuedNs, s[j].sc.EnqueuedNs
		if (a == 0) != (b == 0) {
			return a != 0
		}
		if a != b {
			return a < b
		}
		return s[i].g.name < s[j].g.name
	})
}

// lowestHeld is the oldest collective of the named group that any rank
// holds not completed.
func lowestHeld(al *aligned, name string) (int64, bool) {
	var lo int64
	found := false
	for _, v := range al.views {
		for i := range v.r.Ops {
			e := &v.r.Ops[i]
			if !isP2P(e) && groupName(e) == name && e.State != frdump.StateCompleted && (!found || e.CollectiveSeqID < lo) {
				lo, found = e.CollectiveSeqID, true
			}
		}
	}
	return lo, found
}

// entryOf returns collective seq of the named group as the lowest rank
// that holds it recorded it, and the earliest time any rank enqueued it.
func entryOf(al *aligned, name string, seq int64) (*Op, int64) {
	var first *Op
	var at int64
	for _, v := range al.views { // ascending rank
		for i := range v.r.Ops {
			e := &v.r.Ops[i]
			if e.CollectiveSeqID != seq || isP2P(e) || groupName(e) != name {
				continue
			}
			if first == nil {
				first = e
			}
			if e.TimeCreatedNs > 0 && (at == 0 || e.TimeCreatedNs < at) {
				at = e.TimeCreatedNs
			}
			break
		}
	}
	return first, at
}

// profilingNameOf finds what collective seq of the named group was, on any
// rank that enqueued it.
func profilingNameOf(al *aligned, name string, seq int64) string {
	if e, _ := entryOf(al, name, seq); e != nil {
		return e.ProfilingName
	}
	return ""
}

// hangFinding builds the job-level finding naming the culprits.
func hangFinding(al *aligned, culprits []int, groups []*progress, times map[int]rankTimes) (Finding, bool) {
	ev := map[string]string{"culprit_ranks": rankSet(culprits)}
	var body strings.Builder
	var all []stuckAt
	stuckCount := map[string]bool{}
	for _, r := range culprits {
		stuck := stuckGroups(al, r, groups)
		if len(stuck) == 0 {
			continue
		}
		all = append(all, stuck...)
		t := times[r]
		switch {
		case t.silent:
			fmt.Fprintf(&body, "rank %d: its dump holds no entries (every collective it enqueued completed, and it enqueued no other); its peers wait in %d process groups\n", r, len(stuck))
		case t.known():
			idle := strconv.FormatFloat(t.idle().Seconds(), 'f', 1, 64)
			ev[rankKey(r, "idle_s")] = idle
			fmt.Fprintf(&body, "rank %d: nothing enqueued for %s s before its dump; behind in %d process groups\n", r, idle, len(stuck))
		default:
			fmt.Fprintf(&body, "rank %d: behind its peers in every process group it shares with them (dump time unknown); behind in %d process groups\n", r, len(stuck))
		}
		texts := make([]string, len(stuck))
		for i, s := range stuck {
			texts[i] = s.text()
			stuckCount[s.g.name] = true
			ev[rankKey(r, "pg."+s.g.name+".last_enqueued_collective")] = strconv.FormatInt(s.mine, 10)
			ev["pg."+s.g.name+".last_enqueued_collective_max"] = strconv.FormatInt(s.g.hi, 10)
			fmt.Fprintf(&body, "  %s\n", texts[i])
		}
		ev[rankKey(r, EvidenceStuckCollective)] = strings.Join(texts, "; ")
		if v := viewOf(al, r); v != nil {
			if st := v.r.NewestStack; st != "" {
				ev[rankKey(r, EvidencePythonStack)] = st
				fmt.Fprintf(&body, "  python stack: %s\n", st)
			}
		}
	}
	if len(all) == 0 {
		return Finding{}, false
	}
	sortStuck(all)
	head := all[0].sc
	for _, r := range culprits {
		if _, in := all[0].g.last[r]; (in && all[0].g.last[r] < head.Seq) || (!in && all[0].g.hasMember(r)) {
			head.Missing = append(head.Missing, r)
		}
	}
	ev["stuck_groups"] = strconv.Itoa(len(stuckCount))
	ev["stuck_collective"] = head.String()
	ev["entered_by"] = rankSet(head.Entered)
	var b strings.Builder
	fmt.Fprintf(&b, "Hang: ranks %s stopped; the job waits for them in %s\n", rankSet(culprits), head.String())
	fmt.Fprintf(&b, "missing ranks: %s; entered by %s\n", rankSet(head.Missing), rankSet(head.Entered))
	b.WriteString(body.String())
	return Finding{
		Kind: KindHang, PGID: head.PGID, PGName: head.PGName, PGDesc: head.PGDesc,
		Seq: head.Seq, ProfilingName: head.ProfilingName, Ranks: culprits,
		Message: strings.TrimSuffix(b.String(), "\n"), Evidence: ev, Stuck: &head,
	}, true
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
// folds under the hang the per-group findings it explains. The hang, when
// there is one, comes first.
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
	culprits := findCulprits(al, groups, times, stall)
	hang, ok := Finding{}, false
	if len(culprits) > 0 {
		hang, ok = hangFinding(al, culprits, groups, times)
	}
	if !ok {
		if scheduledOnly && noneRunning(times, stall) {
			// No dump moment tells a stop from a dump taken a moment
			// earlier, and no dump shows one (evidence.go): ranks behind
			// in a group are no evidence of a hang either.
			kept = findings[:0]
			for _, f := range findings {
				if f.Kind != KindMissingRanks && f.Kind != KindPGStatusDivergence {
					kept = append(kept, f)
				}
			}
			return kept
		}
		return findings
	}
	var folded []string
	kept = findings[:0:0]
	for _, f := range findings {
		if f.Kind == KindMissingRanks || f.Kind == KindPGStatusDivergence {
			folded = append(folded, f.Key().String())
			hang.Folded = append(hang.Folded, f)
			continue
		}
		kept = append(kept, f)
	}
	if len(folded) > 0 {
		sortFindings(hang.Folded)
		folded = folded[:0]
		for i := range hang.Folded {
			folded = append(folded, hang.Folded[i].Key().String())
		}
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
