package analysis

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"
)

// findMissingRanks reports the first collective of g that some ranks never
// enqueued while the others started it and none completed it: the hang. A
// collective that completed anywhere was joined by every rank (it cannot
// complete otherwise), so there the missing rank's dump is merely older.
// Later collectives with missing ranks are consequences and go into the
// evidence only.
func findMissingRanks(g *group) (Finding, bool) {
	var (
		f     Finding
		found bool
		later []int64
	)
	for ci := range g.colls {
		c := &g.colls[ci]
		var present, missing []int
		completed := false
		for i, e := range c.entries {
			if e == nil {
				missing = append(missing, g.ranks[i])
				continue
			}
			present = append(present, g.ranks[i])
			completed = completed || e.State == frdump.StateCompleted
		}
		if len(missing) == 0 || len(present) == 0 || completed {
			continue
		}
		if found {
			later = append(later, c.seq)
			continue
		}
		found = true
		f = missingRanksFinding(g, c, present, missing)
	}
	if !found {
		return Finding{}, false
	}
	if len(later) > 0 {
		f.Evidence["later_collectives_missing_ranks"] = seqRanges(later)
		f.Message += "\nlater collectives also missing ranks: " + seqRanges(later)
	}
	return f, true
}

func missingRanksFinding(g *group, c *collective, present, missing []int) Finding {
	e := c.first()
	ev := map[string]string{"present_ranks": rankSet(present)}
	var states []string
	for i, pe := range c.entries {
		r := g.ranks[i]
		if st, ok := g.views[i].status[g.name]; ok {
			ev[rankKey(r, "last_enqueued_collective")] = strconv.FormatInt(st.LastEnqueued, 10)
			ev[rankKey(r, "last_completed_collective")] = strconv.FormatInt(st.LastCompleted, 10)
		}
		if pe == nil {
			ev[rankKey(r, "last_collective_in_dump")] = strconv.FormatInt(g.lastSeq[i], 10)
			continue
		}
		states = append(states, pe.State)
		ev[rankKey(r, "state")] = pe.State
		ev[rankKey(r, "record_id")] = strconv.FormatInt(pe.RecordID, 10)
		if origin, ok := g.origin(i); ok {
			ev[rankKey(r, "created_offset_ms")] = ms(float64(pe.TimeCreatedNs - origin))
		}
	}
	addMissingRanksStacks(g, c, ev)

	var b strings.Builder
	fmt.Fprintf(&b, "Not all ranks joining collective, sequence number: %d\n", c.seq)
	fmt.Fprintf(&b, "internal record id: %d\n", e.RecordID)
	fmt.Fprintf(&b, "group info: %s\n", groupInfo(g.name, g.desc))
	fmt.Fprintf(&b, "collective: %s\n", e.ProfilingName)
	fmt.Fprintf(&b, "missing ranks: %s\n", rankSet(missing))
	fmt.Fprintf(&b, "input sizes: %s\n", pySizes(e.InputSizes))
	fmt.Fprintf(&b, "output sizes: %s\n", pySizes(e.OutputSizes))
	if g.expected != nil {
		fmt.Fprintf(&b, "world size: %d\n", len(g.expected))
		fmt.Fprintf(&b, "expected ranks: %s\n", rankSet(g.expected))
	}
	fmt.Fprintf(&b, "collective state: %s", sameOrByValue(present, states))

	return Finding{
		Kind: KindMissingRanks, PGID: g.id, PGName: g.name, PGDesc: g.desc,
		Seq: c.seq, ProfilingName: e.ProfilingName, Ranks: missing,
		Message: b.String(), Evidence: ev,
	}
}

// addMissingRanksStacks quotes Python stacks as evidence
// (rank.<r>.python_stack), at most maxStackRanks: first each missing rank's
// newest stack (where it is instead, as a hang quotes its culprits'), then
// the stack with which each present rank enqueued the collective (where it
// waits).
func addMissingRanksStacks(g *group, c *collective, ev map[string]string) {
	n := 0
	for _, missing := range []bool{true, false} {
		for i, pe := range c.entries {
			if n == maxStackRanks {
				return
			}
			if (pe == nil) != missing {
				continue
			}
			var st string
			if pe == nil {
				st = g.views[i].r.NewestStack
			} else {
				st = pe.Stack
			}
			if st != "" {
				ev[rankKey(g.ranks[i], EvidencePythonStack)] = st
				n++
			}
		}
	}
}

// origin is the enqueue time of rank i's first aligned collective of g: the
// zero of that rank's own clock for offsets (node clocks differ).
func (g *group) origin(i int) (int64, bool) {
	for ci := range g.colls {
		if e := g.colls[ci].entries[i]; e != nil {
			return e.TimeCreatedNs, true
		}
	}
	return 0, false
}

// sameOrByValue prints the value alone when all ranks agree.
func sameOrByValue(ranks []int, values []string) string {
	if len(values) == 0 {
		return ""
	}
	for _, v := range values[1:] {
		if v != values[0] {
			return byValue(ranks, values)
		}
	}
	return values[0]
}

// field is one property every rank must agree on for a collective.
type field struct {
	key, label string
	equal      func(a, b *Op) bool
	render     func(e *Op) string
	// empty values are skipped: the non-root side of gather/scatter holds no
	// buffer.
	empty func(e *Op) bool
	// sizesOnly fields are not compared for collectives whose sizes may
	// legitimately differ per rank.
	sizesOnly bool
}

var fields = []field{
	{key: "profiling_name", label: "collective type",
		equal:  func(a, b *Op) bool { return a.ProfilingName == b.ProfilingName },
		render: func(e *Op) string { return e.ProfilingName },
		empty:  func(*Op) bool { return false }},
	{key: "input_sizes", label: "input sizes", sizesOnly: true,
		equal:  func(a, b *Op) bool { return equalSizes(a.InputSizes, b.InputSizes) },
		render: func(e *Op) string { return pySizes(e.InputSizes) },
		empty:  func(*Op) bool { return false }},
	{key: "output_sizes", label: "output sizes", sizesOnly: true,
		equal:  func(a, b *Op) bool { return equalSizes(a.OutputSizes, b.OutputSizes) },
		render: func(e *Op) string { return pySizes(e.OutputSizes) },
		empty:  func(*Op) bool { return false }},
	{key: "input_dtypes", label: "input dtypes",
		equal:  func(a, b *Op) bool { return slices.Equal(a.InputDtypes, b.InputDtypes) },
		render: func(e *Op) string { return pyStrings(e.InputDtypes) },
		empty:  func(e *Op) bool { return len(e.InputDtypes) == 0 }},
	{key: "output_dtypes", label: "output dtypes",
		equal:  func(a, b *Op) bool { return slices.Equal(a.OutputDtypes, b.OutputDtypes) },
		render: func(e *Op) string { return pyStrings(e.OutputDtypes) },
		empty:  func(e *Op) bool { return len(e.OutputDtypes) == 0 }},
}

func equalSizes(a, b [][]int64) bool {
	return slices.EqualFunc(a, b, func(x, y []int64) bool { return slices.Equal(x, y) })
}

// unevenSizes tells collectives whose per-rank sizes may legitimately differ
// (uneven all_to_all, all_gather/reduce_scatter variants, gather and scatter
// roots); fr_trace exempts the same family from its size check.
func unevenSizes(profilingName string) bool {
	n := strings.ToLower(profilingName)
	return strings.Contains(n, "gather") || strings.Contains(n, "scatter") ||
		strings.Contains(n, "all_to_all") || strings.Contains(n, "alltoall")
}

// findMismatches reports, per collective, the fields on which ranks disagree;
// the culprits are the ranks outside the majority.
func findMismatches(g *group) []Finding {
	var out []Finding
	for ci := range g.colls {
		c := &g.colls[ci]
		ref := c.first()
		if ref == nil {
			continue
		}
		uneven := unevenSizes(ref.ProfilingName)
		var bad []*field
		for fi := range fields {
			fd := &fields[fi]
			if fd.sizesOnly && uneven {
				continue
			}
			if !allAgree(c, fd) {
				bad = append(bad, fd)
			}
		}
		if len(bad) > 0 {
			out = append(out, mismatchFinding(g, c, bad))
		}
	}
	return out
}

// allAgree is the fast path: no strings are built unless ranks differ.
func allAgree(c *collective, fd *field) bool {
	var ref *Op
	for _, e := range c.entries {
		if e == nil || fd.empty(e) {
			continue
		}
		if ref == nil {
			ref = e
		} else if !fd.equal(ref, e) {
			return false
		}
	}
	return true
}

func mismatchFinding(g *group, c *collective, bad []*field) Finding {
	ev := map[string]string{}
	culprits := map[int]bool{}
	var labels, keys, lines []string
	profilingName := c.first().ProfilingName
	for _, fd := range bad {
		var ranks []int
		var values []string
		count := map[string]int{}
		for i, e := range c.entries {
			if e == nil || fd.empty(e) {
				continue
			}
			v := fd.render(e)
			ranks = append(ranks, g.ranks[i])
			values = append(values, v)
			count[v]++
		}
		// The majority is expected; a tie goes to the lowest rank's value.
		expected := values[0]
		for _, v := range values {
			if count[v] > count[expected] {
				expected = v
			}
		}
		for i, v := range values {
			if v != expected {
				culprits[ranks[i]] = true
				ev[rankKey(ranks[i], fd.key)] = v
			}
		}
		if fd.key == "profiling_name" {
			profilingName = expected
		}
		ev["expected."+fd.key] = expected
		labels = append(labels, fd.label)
		keys = append(keys, fd.key)
		lines = append(lines, fd.label+": "+byValue(ranks, values))
	}
	ev["mismatched_fields"] = strings.Join(keys, ",")
	ranks := make([]int, 0, len(culprits))
	for r := range culprits {
		ranks = append(ranks, r)
	}
	sort.Ints(ranks)

	var b strings.Builder
	fmt.Fprintf(&b, "Collective sequence number: %d has mismatched %s across ranks\n", c.seq, strings.Join(labels, ", "))
	fmt.Fprintf(&b, "group info: %s\n", groupInfo(g.name, g.desc))
	fmt.Fprintf(&b, "collective: %s\n", profilingName)
	fmt.Fprintf(&b, "culprit ranks: %s\n", rankSet(ranks))
	b.WriteString(strings.Join(lines, "\n"))

	return Finding{
		Kind: KindMismatch, PGID: g.id, PGName: g.name, PGDesc: g.desc,
		Seq: c.seq, ProfilingName: profilingName, Ranks: ranks,
		Message: b.String(), Evidence: ev,
	}
}

// findStatusDivergence compares pg_status across ranks, group by group (by
// name, each rank's pg_status resolved on its own: resolveGroupStatus):
// ranks whose last enqueued collective trails the others' by at least
// MinStatusGap are behind.
// Only enqueue counts decide: they are CPU-side progress, while the started and
// completed counts lag by the watchdog's polling and are given as evidence.
func findStatusDivergence(al *aligned, opts Options) []Finding {
	keys := map[string]bool{}
	for _, v := range al.views {
		for k := range v.status {
			keys[k] = true
		}
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)

	var out []Finding
	for _, key := range sorted {
		var ranks []int
		var status []frdump.PGStatus
		for _, v := range al.views {
			if st, ok := v.status[key]; ok {
				ranks = append(ranks, v.rank)
				status = append(status, st)
			}
		}
		if len(ranks) < 2 {
			continue
		}
		lo, hi := status[0].LastEnqueued, status[0].LastEnqueued
		for _, st := range status {
			lo, hi = min(lo, st.LastEnqueued), max(hi, st.LastEnqueued)
		}
		if hi-lo < opts.MinStatusGap {
			continue
		}
		out = append(out, divergenceFinding(al, key, ranks, status, lo, hi))
	}
	return out
}

func divergenceFinding(al *aligned, key string, ranks []int, status []frdump.PGStatus, lo, hi int64) Finding {
	id, name, desc := resolveGroup(al, key)
	ev := map[string]string{}
	var behind []int
	enq := make([]string, len(ranks))
	started := make([]string, len(ranks))
	completed := make([]string, len(ranks))
	for i, r := range ranks {
		st := status[i]
		enq[i] = strconv.FormatInt(st.LastEnqueued, 10)
		started[i] = strconv.FormatInt(st.LastStarted, 10)
		completed[i] = strconv.FormatInt(st.LastCompleted, 10)
		ev[rankKey(r, "last_enqueued_collective")] = enq[i]
		ev[rankKey(r, "last_started_collective")] = started[i]
		ev[rankKey(r, "last_completed_collective")] = completed[i]
		if st.LastEnqueued < hi {
			behind = append(behind, r)
		}
	}
	next := lo + 1 // the first collective the slowest ranks never enqueued
	profilingName := profilingNameOf(al, name, next)

	var b strings.Builder
	fmt.Fprintf(&b, "Ranks behind in process group, last enqueued collective: %d (others up to %d)\n", lo, hi)
	fmt.Fprintf(&b, "group info: %s\n", groupInfo(name, desc))
	fmt.Fprintf(&b, "ranks behind: %s\n", rankSet(behind))
	fmt.Fprintf(&b, "last enqueued collective: %s\n", byValue(ranks, enq))
	fmt.Fprintf(&b, "last started collective: %s\n", byValue(ranks, started))
	fmt.Fprintf(&b, "last completed collective: %s", byValue(ranks, completed))
	if profilingName != "" {
		fmt.Fprintf(&b, "\nfirst collective not enqueued: %d (%s)", next, profilingName)
	}

	return Finding{
		Kind: KindPGStatusDivergence, PGID: id, PGName: name, PGDesc: desc,
		Seq: next, ProfilingName: profilingName, Ranks: behind,
		Message: b.String(), Evidence: ev,
	}
}

// resolveGroup describes the process group of that name: its pg_id and
// description from the entries, else its description from pg_config (the
// id then read from the name, -1 when not a number).
func resolveGroup(al *aligned, key string) (id int64, name, desc string) {
	for _, g := range al.groups {
		if g.name == key {
			return g.id, g.name, g.desc
		}
	}
	id, err := strconv.ParseInt(key, 10, 64)
	if err != nil {
		id = -1
	}
	for _, v := range al.views {
		if cfg, ok := v.r.PGConfig[key]; ok {
			return id, key, cfg.Desc
		}
	}
	return id, key, ""
}

// findTimeouts reports operations the watchdog retired without seeing them
// complete: one finding per (group, sequence), naming every rank where it
// timed out. Every entry counts, window or not, p2p included (keyed by
// p2p_seq_id, which is per rank: ranks sharing one are reported together).
func findTimeouts(al *aligned) []Finding {
	type bucket struct {
		key     FindingKey
		desc    string
		id      int64
		ranks   []int
		entries []*Op
	}
	buckets := map[FindingKey]*bucket{}
	var order []*bucket
	for _, v := range al.views {
		for i := range v.r.Ops {
			e := &v.r.Ops[i]
			if !e.TimedOut() {
				continue
			}
			p2p := isP2P(e)
			k := FindingKey{PGName: groupName(e), P2P: p2p, Seq: e.CollectiveSeqID, Kind: KindTimeout}
			if p2p {
				k.Seq = e.P2PSeqID
			}
			b := buckets[k]
			if b == nil {
				b = &bucket{key: k, desc: e.PGDesc, id: e.PGID}
				buckets[k] = b
				order = append(order, b)
			}
			if len(b.ranks) > 0 && b.ranks[len(b.ranks)-1] == v.rank {
				continue // this rank already counted for this sequence
			}
			b.ranks = append(b.ranks, v.rank)
			b.entries = append(b.entries, e)
		}
	}

	out := make([]Finding, 0, len(order))
	for _, b := range order {
		ev := map[string]string{}
		names := make([]string, len(b.ranks))
		states := make([]string, len(b.ranks))
		timeouts := make([]string, len(b.ranks))
		for i, r := range b.ranks {
			e := b.entries[i]
			names[i], states[i] = e.ProfilingName, e.State
			timeouts[i] = strconv.FormatInt(e.TimeoutMs, 10) + " ms"
			ev[rankKey(r, "state")] = e.State
			ev[rankKey(r, "record_id")] = strconv.FormatInt(e.RecordID, 10)
			ev[rankKey(r, "timeout_ms")] = strconv.FormatInt(e.TimeoutMs, 10)
			ev[rankKey(r, "profiling_name")] = e.ProfilingName
			// Where the rank waited: the stack that enqueued the operation.
			if i < maxStackRanks {
				if st := e.Stack; st != "" {
					ev[rankKey(r, EvidencePythonStack)] = st
				}
			}
		}
		var sb strings.Builder
		if b.key.P2P {
			fmt.Fprintf(&sb, "Point-to-point operation, p2p sequence number: %d timed out on ranks %s\n", b.key.Seq, rankSet(b.ranks))
		} else {
			fmt.Fprintf(&sb, "Collective sequence number: %d timed out on ranks %s\n", b.key.Seq, rankSet(b.ranks))
		}
		fmt.Fprintf(&sb, "internal record id: %d\n", b.entries[0].RecordID)
		fmt.Fprintf(&sb, "group info: %s\n", groupInfo(b.key.PGName, b.desc))
		fmt.Fprintf(&sb, "collective: %s\n", sameOrByValue(b.ranks, names))
		fmt.Fprintf(&sb, "collective state: %s\n", sameOrByValue(b.ranks, states))
		fmt.Fprintf(&sb, "timeout: %s", sameOrByValue(b.ranks, timeouts))
		profilingName := b.entries[0].ProfilingName
		if sameOrByValue(b.ranks, names) != profilingName {
			profilingName = "" // several different p2p operations
		}
		out = append(out, Finding{
			Kind: KindTimeout, PGID: b.id, PGName: b.key.PGName, PGDesc: b.desc,
			Seq: b.key.Seq, P2P: b.key.P2P, ProfilingName: profilingName, Ranks: b.ranks,
			Message: sb.String(), Evidence: ev,
		})
	}
	return out
}
