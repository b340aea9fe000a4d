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
//   - pg_status' last_completed_collective: an operation completes once
//     every member enqueued it (a send once its receive is enqueued) and
//     every operation this rank enqueued before it completed (its GPU runs
//     them in order).
//   - With onlyActive, the entries are the operations not completed.

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

func realize(dumps []*frdump.Dump, groups []moeGroup, onlyActive bool) {
	members := map[string][]int{}
	for _, g := range groups {
		members[g.name] = g.ranks
	}
	// finalSeq: the newest collective each rank enqueued per group;
	// p2pCount: its point-to-point operations per group.
	finalSeq := make([]map[string]int64, len(dumps))
	p2pCount := make([]map[string]int, len(dumps))
	for r, d := range dumps {
		finalSeq[r], p2pCount[r] = map[string]int64{}, map[string]int{}
		for _, e := range d.Entries {
			if e.IsP2P {
				p2pCount[r][e.PGName]++
			} else {
				finalSeq[r][e.PGName] = max(finalSeq[r][e.PGName], e.CollectiveSeqID)
			}
		}
	}
	for r, d := range dumps {
		ids := localIDs(r, groups)
		completed := map[string]int64{}
		blocked := false
		nth := map[string]int{}
		kept := d.Entries[:0]
		for _, e := range d.Entries {
			done := !blocked
			if e.IsP2P {
				nth[e.PGName]++
				for _, m := range members[e.PGName] {
					if m != r && p2pCount[m][e.PGName] < nth[e.PGName] {
						done = false
					}
				}
			} else {
				for _, m := range members[e.PGName] {
					if finalSeq[m][e.PGName] < e.CollectiveSeqID {
						done = false
					}
				}
			}
			blocked = !done
			if done && !e.IsP2P {
				completed[e.PGName] = e.CollectiveSeqID
			}
			e.PGID = ids[e.PGName]
			if !done || !onlyActive {
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
