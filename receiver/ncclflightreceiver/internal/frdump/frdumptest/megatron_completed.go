package frdumptest

import (
	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"
)

// When the MoE job's operations complete, on one time base (each rank's
// clock less its offset).
//
// An operation can run on a rank's GPU once it is enqueued there, the
// operations before it on the same process group (one NCCL stream per
// group) completed, and so did every operation before it that the rank's
// computation waits for: all but the model-parallel reduction of the
// auxiliary-loss statistics, whose result nothing consumes. A collective
// completes, on every member at once, gpuRun after the last member could
// run it; a point-to-point operation with its counterpart (a group's n-th
// send on one rank and the n-th receive on the other). So a collective a
// rank never enqueued holds up its peers' later operations too: their
// expert all_to_all waits for a tensor all_reduce of theirs that a stopped
// rank never joined, and the experts of that all_to_all wait with them.
const gpuRun = int64(500_000)

// completions returns, per rank and entry, when it completed (0: never).
func completions(dumps []*frdump.Dump, members map[string][]int, clocks []int64) [][]int64 {
	type key struct {
		name string
		seq  int64 // a point-to-point operation's: minus its number in the group
	}
	keys := make([][]key, len(dumps))
	where := make([]map[key]int, len(dumps)) // rank → key → entry index
	// waitsFor: the entries entry i runs after (the previous one of its
	// group, the previous one the computation waits for); -1 none.
	waitsFor := make([][][2]int, len(dumps))
	done := make([][]int64, len(dumps))
	for r, d := range dumps {
		keys[r], where[r] = make([]key, len(d.Entries)), map[key]int{}
		waitsFor[r], done[r] = make([][2]int, len(d.Entries)), make([]int64, len(d.Entries))
		p2p := map[string]int64{}
		lastOf := map[string]int{}
		lastWaited := -1
		for i, e := range d.Entries {
			k := key{e.PGName, e.CollectiveSeqID}
			if e.IsP2P {
				p2p[e.PGName]++
				k.seq = -p2p[e.PGName]
			}
			keys[r][i], where[r][k] = k, i
			prev, ok := lastOf[e.PGName]
			if !ok {
				prev = -1
			}
			waitsFor[r][i] = [2]int{prev, lastWaited}
			lastOf[e.PGName] = i
			if e.PGDesc != "MODEL_PARALLEL_GROUP" { // nothing waits for it
				lastWaited = i
			}
		}
	}
	// ready: when entry i of rank r can run; 0 while it cannot yet.
	ready := func(r, i int) int64 {
		at := dumps[r].Entries[i].TimeCreatedNs - clocks[r]
		for _, j := range waitsFor[r][i] {
			if j < 0 {
				continue
			}
			if done[r][j] == 0 {
				return 0
			}
			at = max(at, done[r][j])
		}
		return at
	}
	for changed := true; changed; {
		changed = false
		for r, d := range dumps {
			for i := range d.Entries {
				if done[r][i] != 0 {
					continue
				}
				k := keys[r][i]
				at := ready(r, i)
				for _, m := range members[k.name] {
					if at == 0 || m == r {
						continue
					}
					j, ok := where[m][k]
					if !ok {
						at = 0
					} else if mr := ready(m, j); mr == 0 {
						at = 0
					} else {
						at = max(at, mr)
					}
				}
				if at == 0 {
					continue
				}
				for _, m := range members[k.name] {
					if j, ok := where[m][k]; ok {
						done[m][j] = at + gpuRun
					}
				}
				changed = true
			}
		}
	}
	return done
}

// blockedAt sets how many of its entries each rank enqueued: a rank
// enqueues its program in order, after an operation the CPU waits for
// (sync) only once it completed, and a rank whose enqueued is set (a
// culprit's stop) no further than that; -1: as far as it gets.
func blockedAt(dumps []*frdump.Dump, members map[string][]int, clocks []int64, enqueued []int, sync func(rank, i int) bool) {
	limit := make([]int, len(dumps))
	for r, n := range enqueued {
		limit[r] = n
		if n < 0 {
			limit[r] = len(dumps[r].Entries)
		}
		enqueued[r] = 0
	}
	view := make([]*frdump.Dump, len(dumps))
	for changed := true; changed; {
		for r, d := range dumps {
			v := *d
			v.Entries = d.Entries[:enqueued[r]]
			view[r] = &v
		}
		done := completions(view, members, clocks)
		changed = false
		for r := range dumps {
			for enqueued[r] < limit[r] {
				last := enqueued[r] - 1
				if last >= 0 && sync(r, last) && (last >= len(done[r]) || done[r][last] == 0) {
					break
				}
				enqueued[r]++
				changed = true
			}
		}
	}
}
