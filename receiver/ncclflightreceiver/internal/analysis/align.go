package analysis

import (
	"sort"
	"strconv"
	"strings"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"
)

// rankView is one rank's dump with the entries inside the common window.
type rankView struct {
	rank   int
	r      *Rank
	window []*Op // entries with RecordID >= aligned.windowStart, dump order
	// status is the rank's pg_status by process-group name
	// (resolveGroupStatus): keys it cannot resolve are left out.
	status map[string]frdump.PGStatus
}

// aligned is the dumps lined up for comparison.
type aligned struct {
	views       []*rankView // ascending rank
	windowStart int64
	groups      []*group // by name
}

func (a *aligned) rankIDs() []int {
	if len(a.views) == 0 {
		return nil
	}
	ids := make([]int, len(a.views))
	for i, v := range a.views {
		ids[i] = v.rank
	}
	return ids
}

// group is one process group's collectives, aligned by collective_seq_id.
type group struct {
	name, desc string
	id         int64
	// ranks are the participants: the ranks with any collective of this group
	// in their dump (window or not), ascending. views and lastSeq run parallel.
	ranks []int
	views []*rankView
	// lastSeq is the newest collective_seq_id of the group in each
	// participant's dump; -1 when the rank has none.
	lastSeq []int64
	// expected are the member ranks from pg_config; nil when no dump says.
	expected []int
	// colls ascending by seq, starting at the first seq every participant
	// with entries in the window still holds.
	colls []collective
}

// collective is one collective_seq_id across the participants.
type collective struct {
	seq     int64
	entries []*Op // indexed like group.ranks; nil: the rank has no such entry
}

// first returns the first rank's entry present.
func (c *collective) first() *Op {
	for _, e := range c.entries {
		if e != nil {
			return e
		}
	}
	return nil
}

// isP2P tells point-to-point operations apart; older dumps may lack is_p2p,
// so the profiling name ("nccl:send 1->2", "nccl:recv 2<-1") also counts.
func isP2P(e *Op) bool {
	if e.IsP2P {
		return true
	}
	_, op, _ := strings.Cut(e.ProfilingName, ":")
	return strings.HasPrefix(op, "send") || strings.HasPrefix(op, "recv")
}

// groupName is the name all ranks share for a process group.
func groupName(e *Op) string {
	if e.PGName != "" {
		return e.PGName
	}
	return strconv.FormatInt(e.PGID, 10)
}

// align drops nil and duplicate ranks, trims every rank to the common
// window and builds the per-group alignment.
func align(ranks []*Rank) *aligned {
	byRank := make(map[int]*rankView, len(ranks))
	for _, r := range ranks {
		if r == nil {
			continue
		}
		byRank[r.Rank] = &rankView{rank: r.Rank, r: r, status: resolveGroupStatus(r)} // a later dump of a rank wins
	}
	al := &aligned{views: make([]*rankView, 0, len(byRank))}
	for _, v := range byRank {
		al.views = append(al.views, v)
	}
	sort.Slice(al.views, func(i, j int) bool { return al.views[i].rank < al.views[j].rank })

	// The ring buffer wrapped at different points on each rank: keep only what
	// every rank still holds (fr_trace's align_trace_from_beginning).
	for _, v := range al.views {
		if len(v.r.Ops) == 0 {
			continue
		}
		first := v.r.Ops[0].RecordID
		for i := range v.r.Ops {
			first = min(first, v.r.Ops[i].RecordID)
		}
		al.windowStart = max(al.windowStart, first)
	}
	for _, v := range al.views {
		v.window = make([]*Op, 0, len(v.r.Ops))
		for i := range v.r.Ops {
			if e := &v.r.Ops[i]; e.RecordID >= al.windowStart {
				v.window = append(v.window, e)
			}
		}
	}

	al.groups = buildGroups(al.views)
	return al
}

func buildGroups(views []*rankView) []*group {
	groups := map[string]*group{}
	participant := map[string]map[int]int{} // group → rank → index in group.ranks

	// Pass 1: participants and their newest seq, from whole dumps, so that a
	// rank whose window holds nothing of a group still counts as missing.
	for _, v := range views {
		for i := range v.r.Ops {
			e := &v.r.Ops[i]
			if isP2P(e) {
				continue
			}
			name := groupName(e)
			g := groups[name]
			if g == nil {
				g = &group{name: name, desc: e.PGDesc, id: e.PGID}
				groups[name] = g
				participant[name] = map[int]int{}
			}
			if g.desc == "" {
				g.desc = e.PGDesc
			}
			idx, ok := participant[name][v.rank]
			if !ok {
				idx = len(g.ranks)
				participant[name][v.rank] = idx
				g.ranks = append(g.ranks, v.rank)
				g.views = append(g.views, v)
				g.lastSeq = append(g.lastSeq, -1)
			}
			g.lastSeq[idx] = max(g.lastSeq[idx], e.CollectiveSeqID)
		}
	}

	out := make([]*group, 0, len(groups))
	for name, g := range groups {
		g.expected = expectedRanks(name, views)
		fillCollectives(g, participant[name])
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// fillCollectives lines up the window entries of g by collective_seq_id.
func fillCollectives(g *group, participant map[int]int) {
	n := len(g.ranks)
	index := map[int64]int{} // seq → index in g.colls
	lowSeq := int64(-1 << 63)
	for _, v := range g.views {
		idx := participant[v.rank]
		minSeq, seen := int64(0), false
		for _, e := range v.window {
			if isP2P(e) || groupName(e) != g.name {
				continue
			}
			if !seen || e.CollectiveSeqID < minSeq {
				minSeq, seen = e.CollectiveSeqID, true
			}
			ci, ok := index[e.CollectiveSeqID]
			if !ok {
				ci = len(g.colls)
				index[e.CollectiveSeqID] = ci
				g.colls = append(g.colls, collective{seq: e.CollectiveSeqID, entries: make([]*Op, n)})
			}
			if g.colls[ci].entries[idx] == nil { // a repeated seq on one rank: keep the first
				g.colls[ci].entries[idx] = e
			}
		}
		if seen {
			lowSeq = max(lowSeq, minSeq)
		}
	}
	// Ranks with a shorter window did not record the older collectives: only
	// compare from the first seq every rank holds.
	kept := g.colls[:0]
	for _, c := range g.colls {
		if c.seq >= lowSeq {
			kept = append(kept, c)
		}
	}
	g.colls = kept
	sort.Slice(g.colls, func(i, j int) bool { return g.colls[i].seq < g.colls[j].seq })
}

// expectedRanks returns the group's members from the first pg_config that
// lists them.
func expectedRanks(name string, views []*rankView) []int {
	for _, v := range views {
		if cfg, ok := v.r.PGConfig[name]; ok && cfg.Ranks != nil {
			r := append([]int(nil), cfg.Ranks...)
			sort.Ints(r)
			return r
		}
	}
	return nil
}
