package frdumptest

import (
	"strconv"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"
)

// What real dumps of the job write that the program above does not say
// (the real dumps of such a job are the receiver's testdata/real):
//
//   - Each rank numbers the process groups it belongs to itself, in the
//     order it created them, with gaps (torch counts some groups a rank is
//     not in): the entries' pg_id and pg_status' keys are those ids, not
//     pg_config's names; the same id names different groups on different
//     ranks.
//   - pg_status' last_completed_collective and, with onlyActive, which
//     entries are written: what the rank's watchdog saw complete before it
//     dumped (megatron_completed.go).
//   - With onlyActive, the entries are the operations not seen completed.

// localIDs returns rank's id of each of its groups: their order of creation,
// with a gap after the first two.
func localIDs(rank int, groups []moeGroup) map[string]int64 {
	out := map[string]int64{}
	next := int64(0)
	for _, g := range groups {
		for _, r := range g.ranks {
			if r == rank {
				out[g.name] = next
				next++
				if next == 2 {
					next++ // a group this rank took no part in
				}
			}
		}
	}
	return out
}

// realize gives the dumps what real ones hold beyond the program: each
// rank's own group ids, pg_status' last completed, and with onlyActive only
// the operations in flight. clocks are the ranks' clock offsets (to compare
// enqueue and dump times across nodes); frozen the index of the entry from
// which a rank's watchdog sees nothing complete (a failed GPU), -1 none.
func realize(dumps []*frdump.Dump, members map[string][]int, groups []moeGroup, clocks []int64, frozen []int, onlyActive bool) {
	done := completions(dumps, members, clocks)
	for r, d := range dumps {
		ids := localIDs(r, groups)
		completed := map[string]int64{}
		kept := d.Entries[:0]
		for i, e := range d.Entries {
			seen := done[r][i] > 0 && done[r][i] <= d.DumpedAtNs-clocks[r] && (frozen[r] < 0 || i < frozen[r])
			if seen && !e.IsP2P {
				completed[e.PGName] = max(completed[e.PGName], e.CollectiveSeqID)
			}
			e.PGID = ids[e.PGName]
			if !seen || !onlyActive {
				kept = append(kept, e)
			}
		}
		d.Entries = kept
		status := make(map[string]frdump.PGStatus, len(d.PGStatus))
		for name, st := range d.PGStatus {
			st.LastCompleted = -1
			if c, ok := completed[name]; ok {
				st.LastCompleted = c
			}
			status[strconv.FormatInt(ids[name], 10)] = st
		}
		d.PGStatus = status
	}
}
