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
	c := newCompleter(dumps, members, clocks)
	for r, d := range dumps {
		c.limit[r] = len(d.Entries)
	}
	c.run()
	return c.done
}

// opKey names an operation across ranks: a collective by group and
// sequence, a point-to-point operation by group and minus its number there.
type opKey struct {
	name string
	seq  int64
}

// completer finds completions over the first limit[r] entries of each
// rank; raising a limit and running again goes on from what it found (an
// operation's completion depends only on the operations before it).
type completer struct {
	dumps   []*frdump.Dump
	members map[string][]int
	clocks  []int64
	keys    [][]opKey
	where   []map[opKey]int // rank → key → entry index
	// waitsFor: the entries entry i runs after (the previous one of its
	// group, the previous one the computation waits for); -1 none.
	waitsFor [][][2]int
	done     [][]int64
	limit    []int
	lo       []int // every entry before it is done
}

func newCompleter(dumps []*frdump.Dump, members map[string][]int, clocks []int64) *completer {
	n := len(dumps)
	c := &completer{dumps: dumps, members: members, clocks: clocks, keys: make([][]opKey, n),
		where: make([]map[opKey]int, n), waitsFor: make([][][2]int, n), done: make([][]int64, n),
		limit: make([]int, n), lo: make([]int, n)}
	for r, d := range dumps {
		c.keys[r], c.where[r] = make([]opKey, len(d.Entries)), map[opKey]int{}
		c.waitsFor[r], c.done[r] = make([][2]int, len(d.Entries)), make([]int64, len(d.Entries))
		p2p := map[string]int64{}
		lastOf := map[string]int{}
		lastWaited := -1
		for i, e := range d.Entries {
			k := opKey{e.PGName, e.CollectiveSeqID}
			if e.IsP2P {
				p2p[e.PGName]++
				k.seq = -p2p[e.PGName]
			}
			c.keys[r][i], c.where[r][k] = k, i
			prev, ok := lastOf[e.PGName]
			if !ok {
				prev = -1
			}
			c.waitsFor[r][i] = [2]int{prev, lastWaited}
			lastOf[e.PGName] = i
			if e.PGDesc != "MODEL_PARALLEL_GROUP" { // nothing waits for it
				lastWaited = i
			}
		}
	}
	return c
}

// ready: when entry i of rank r can run; 0 while it cannot yet.
func (c *completer) ready(r, i int) int64 {
	if i >= c.limit[r] {
		return 0
	}
	at := c.dumps[r].Entries[i].TimeCreatedNs - c.clocks[r]
	for _, j := range c.waitsFor[r][i] {
		if j < 0 {
			continue
		}
		if c.done[r][j] == 0 {
			return 0
		}
		at = max(at, c.done[r][j])
	}
	return at
}

func (c *completer) run() {
	for changed := true; changed; {
		changed = false
		for r := range c.dumps {
			for c.lo[r] < c.limit[r] && c.done[r][c.lo[r]] != 0 {
				c.lo[r]++
			}
			for i := c.lo[r]; i < c.limit[r]; i++ {
				if c.done[r][i] != 0 {
					continue
				}
				k := c.keys[r][i]
				at := c.ready(r, i)
				for _, m := range c.members[k.name] {
					if at == 0 || m == r {
						continue
					}
					j, ok := c.where[m][k]
					if !ok {
						at = 0
					} else if mr := c.ready(m, j); mr == 0 {
						at = 0
					} else {
						at = max(at, mr)
					}
				}
				if at == 0 {
					continue
				}
				for _, m := range c.members[k.name] {
					if j, ok := c.where[m][k]; ok {
						c.done[m][j] = at + gpuRun
					}
				}
				changed = true
			}
		}
	}
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
	}
	c := newCompleter(dumps, members, clocks)
	for changed := true; changed; {
		c.run()
		changed = false
		for r := range dumps {
			for c.limit[r] < limit[r] {
				last := c.limit[r] - 1
				if last >= 0 && sync(r, last) && c.done[r][last] == 0 {
					break
				}
				c.limit[r]++
				changed = true
			}
		}
	}
	copy(enqueued, c.limit)
}
