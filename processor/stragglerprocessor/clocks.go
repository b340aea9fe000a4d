package stragglerprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/stragglerprocessor"

import (
	"cmp"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/semconv"
)

// A job's nodes' clocks (issue 30). Every rank's step span carries its
// node's clock, and a synchronous job's ranks end a step together (they
// meet in its last collective), so the same step's end times on two nodes
// differ by their clocks' offset plus milliseconds. Each node's offset is
// the median end of its ranks less the median of those node medians (the
// job's clock): one odd rank or one wrong node moves neither.
const (
	// clockSkewSteps decided steps in a row must disagree beyond
	// clock_skew_warning before the job's warning.
	clockSkewSteps = 3
	// maxSkewedNodesLogged bounds the nodes the warning names.
	maxSkewedNodesLogged = 8
)

// clockCheck is a job's check of its nodes' clocks.
type clockCheck struct {
	over   int  // decided steps in a row whose node clocks disagreed beyond the bound
	warned bool // the job's one warning was logged: nothing more is checked
}

// nodeOffset is a node's clock against the job's.
type nodeOffset struct {
	node   string
	offset time.Duration
}

// clockScratch is the per-step work of nodeOffsets, reused from step to
// step (under p.mu).
type clockScratch struct {
	index  map[string]int32
	nodes  []string
	counts []int32
	starts []int32
	ends   []int64 // grouped by node
	pairs  []nodeEnd
	meds   []int64 // by node
	sorted []int64 // meds, sorted for their median
	out    []nodeOffset
}

type nodeEnd struct {
	node int32
	end  int64
}

// nodeOffsets returns the clock offset of every node of the step (by
// host.name; records without one or without an end are left out), sorted
// by offset, or nil when fewer than two nodes reported.
func (c *clockScratch) nodeOffsets(records []rankRecord) []nodeOffset {
	if c.index == nil {
		c.index = map[string]int32{}
	}
	clear(c.index)
	c.nodes, c.counts, c.pairs = c.nodes[:0], c.counts[:0], c.pairs[:0]
	last, n := "", int32(-1) // a node's ranks usually come one after another
	for i := range records {
		r := &records[i]
		if r.host == "" || r.end == 0 {
			continue
		}
		if r.host != last || n < 0 {
			var ok bool
			if n, ok = c.index[r.host]; !ok {
				n = int32(len(c.nodes))
				c.index[r.host] = n
				c.nodes = append(c.nodes, r.host)
				c.counts = append(c.counts, 0)
			}
			last = r.host
		}
		c.counts[n]++
		c.pairs = append(c.pairs, nodeEnd{node: n, end: int64(r.end)})
	}
	if len(c.nodes) < 2 {
		return nil
	}
	// Lay the ends out node by node (a counting sort).
	c.starts = slices.Grow(c.starts[:0], len(c.nodes)+1)
	c.starts = append(c.starts, 0)
	for _, k := range c.counts {
		c.starts = append(c.starts, c.starts[len(c.starts)-1]+k)
	}
	c.ends = slices.Grow(c.ends[:0], len(c.pairs))[:len(c.pairs)]
	fill := c.counts // reused as each node's next slot
	for n := range fill {
		fill[n] = c.starts[n]
	}
	for _, p := range c.pairs {
		c.ends[fill[p.node]] = p.end
		fill[p.node]++
	}
	c.meds = c.meds[:0]
	for n := range c.nodes {
		c.meds = append(c.meds, median64(c.ends[c.starts[n]:c.starts[n+1]]))
	}
	c.sorted = append(c.sorted[:0], c.meds...)
	job := median64(c.sorted)
	c.out = c.out[:0]
	for n, node := range c.nodes {
		c.out = append(c.out, nodeOffset{node: node, offset: time.Duration(c.meds[n] - job)})
	}
	slices.SortFunc(c.out, func(a, b nodeOffset) int {
		return cmp.Or(cmp.Compare(a.offset, b.offset), cmp.Compare(a.node, b.node))
	})
	return c.out
}

// median64 sorts xs and returns its median (the mean of the middle two
// for an even count); xs is not empty.
func median64(xs []int64) int64 {
	slices.Sort(xs)
	m := len(xs) / 2
	if len(xs)%2 == 1 {
		return xs[m]
	}
	return xs[m-1] + (xs[m]-xs[m-1])/2
}

// checkClocks compares the step's node clocks and, once they disagreed by
// more than clock_skew_warning in clockSkewSteps decided steps in a row,
// logs the job's one warning and counts the job. Callers hold p.mu.
func (p *stragglerProcessor) checkClocks(st *openStep, eff *effects) {
	cc := &st.job.clocks
	bound := p.cfg.ClockSkewWarning
	if bound <= 0 || cc.warned {
		return
	}
	offs := p.clockScratch.nodeOffsets(st.records)
	if offs == nil {
		return // one node: nothing to compare, and no evidence either way
	}
	skew := offs[len(offs)-1].offset - offs[0].offset
	if skew <= bound {
		cc.over = 0
		return
	}
	if cc.over++; cc.over < clockSkewSteps {
		return
	}
	cc.warned = true
	eff.skewedJobs++
	// The nodes furthest from the job's clock, at most a few.
	named := slices.Clone(offs)
	slices.SortStableFunc(named, func(a, b nodeOffset) int { return cmp.Compare(abs(b.offset), abs(a.offset)) })
	var nodes []string
	for _, o := range named {
		if len(nodes) == maxSkewedNodesLogged || abs(o.offset) <= bound/2 {
			break
		}
		nodes = append(nodes, o.node+" "+signed(o.offset))
	}
	key := st.job.key
	p.logger.Warn("stragglerprocessor: the job's node clocks disagree; each straggler's fault.first_seen is on its own node's clock",
		zap.String(semconv.AttrTrainingJobID, key.job), zap.Int64(semconv.AttrTrainingAttempt, key.attempt),
		zap.Duration("skew", skew), zap.Duration("clock_skew_warning", bound),
		zap.Strings("nodes", nodes), zap.Int("nodes_compared", len(offs)),
		zap.String("earliest_node", offs[0].node), zap.String("latest_node", offs[len(offs)-1].node),
		zap.Int64("step", st.step))
}

func abs(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// signed writes d with its sign: "+1m30s", "-2s".
func signed(d time.Duration) string {
	if d >= 0 {
		return "+" + d.String()
	}
	return d.String()
}
