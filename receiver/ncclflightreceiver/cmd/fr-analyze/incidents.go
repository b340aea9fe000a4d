package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"
)

// Incidents. A tree copied off a cluster often holds the dumps of several
// incidents: other jobs, other attempts of one job (each restart dumps
// again), jobs of other sizes. Analysing them together compares unrelated
// groups, so the dumps are grouped first and each incident is analysed on
// its own:
//
//   - Dumps of one directory form a unit; a directory whose dumps name
//     different world sizes (pg_config), or whose dumps' own times (the
//     newest entry of each) lie more than --incident-gap apart, holds
//     several units. A dump without entries has no time: it joins the
//     largest unit of its directory and world size.
//   - A unit that holds every rank of its world is an incident. Other
//     units (one directory per node) join another of the same world size
//     whose ranks they do not repeat, whose pg_config agrees with theirs
//     on every group both name, and whose times lie within --incident-gap;
//     among several, the one in the nearest directory.
//   - Where one incident has two dumps of a rank (the pickle and JSON
//     forms of one dump, or two dumps of one moment), the pickle is used
//     (JSON holds no Python stacks), else the one with the newest entry;
//     the other is skipped.
//
// Only the dumps' contents decide this, never the files' times: copies
// change those.

// incident is one job's dumps of one moment, analysed on its own.
type incident struct {
	name   string // the directory holding its dumps (their nearest common parent)
	world  int    // the job's size from pg_config; 0 when unknown
	dumps  []input
	newest int64 // the newest entry time of any of its dumps; 0 when none has entries
	lo, hi int64 // the span of its dumps' newest entry times
	pgs    map[string]frdump.PGConfig
	ranks  map[int]int // rank → index in dumps
	dirs   []string
}

func newIncident(world int) *incident {
	return &incident{world: world, pgs: map[string]frdump.PGConfig{}, ranks: map[int]int{}}
}

// add puts a dump into the incident; where the rank is there already, the
// better of the two stays and the other is returned as skipped.
func (c *incident) add(in input) (skipped *fileProblem) {
	if i, dup := c.ranks[in.rank]; dup {
		keep, drop := c.dumps[i], in
		if better(in, keep) {
			keep, drop = in, keep
		}
		c.dumps[i] = keep
		c.refresh()
		return &fileProblem{Path: drop.path, Reason: reasonDuplicate,
			Detail: fmt.Sprintf("rank %d is also in %s, which is used (a pickle holds the Python stacks; else the dump with the newest entry)", in.rank, keep.path)}
	}
	c.ranks[in.rank] = len(c.dumps)
	c.dumps = append(c.dumps, in)
	c.see(in)
	return nil
}

// refresh recomputes what the incident's dumps tell, after one replaced
// another.
func (c *incident) refresh() {
	c.pgs, c.dirs, c.lo, c.hi, c.newest = map[string]frdump.PGConfig{}, nil, 0, 0, 0
	for _, in := range c.dumps {
		c.see(in)
	}
}

func (c *incident) see(in input) {
	for name, g := range in.records.PGConfig {
		if _, ok := c.pgs[name]; !ok {
			c.pgs[name] = g
		}
	}
	if !slices.Contains(c.dirs, in.dir) {
		c.dirs = append(c.dirs, in.dir)
	}
	if in.timed() {
		if c.lo == 0 || in.newest < c.lo {
			c.lo = in.newest
		}
		c.hi = max(c.hi, in.newest)
		c.newest = c.hi
	}
}

// complete reports whether the incident holds every rank of its world.
func (c *incident) complete() bool {
	if c.world <= 0 {
		return false
	}
	n := 0
	for r := range c.ranks {
		if r < c.world {
			n++
		}
	}
	return n == c.world
}

// joins reports whether unit u can be part of incident c: the same world,
// no rank of c again, pg_config agreeing on every group both name, and
// times within gap (a side without times does not object).
func (c *incident) joins(u *incident, gap time.Duration) bool {
	if c.world != u.world || c.complete() {
		return false
	}
	for r := range u.ranks {
		if _, dup := c.ranks[r]; dup {
			return false
		}
	}
	if !agree(c.pgs, u.pgs) {
		return false
	}
	if c.hi > 0 && u.hi > 0 {
		apart := max(u.lo-c.hi, c.lo-u.hi)
		if apart > int64(gap) {
			return false
		}
	}
	return true
}

// agree reports whether two pg_configs describe the same groups alike
// wherever they name the same one: dumps of one job do (a rank lists only
// its own groups), another job's or attempt's often do not.
func agree(a, b map[string]frdump.PGConfig) bool {
	for name, g := range a {
		if h, ok := b[name]; ok && (g.Desc != h.Desc || !slices.Equal(g.Ranks, h.Ranks)) {
			return false
		}
	}
	return true
}

// better reports whether a is the dump to analyse rather than b, both of one
// rank and incident: the pickle (JSON dumps hold no Python stacks), else the
// one whose entries reach later.
func better(a, b input) bool {
	if a.form != b.form {
		return a.form == "pickle"
	}
	if a.newest != b.newest {
		return a.newest > b.newest
	}
	return a.path > b.path // deterministic
}

// groupIncidents groups the dumps read into incidents, ordered by name and
// then time; the dumps of each by rank. It returns the dumps skipped as
// another of a rank's.
func groupIncidents(inputs []input, gap time.Duration) ([]*incident, []fileProblem) {
	var skipped []fileProblem
	var units []*incident
	byDir := map[string][]input{}
	var dirs []string
	for _, in := range inputs {
		if _, ok := byDir[in.dir]; !ok {
			dirs = append(dirs, in.dir)
		}
		byDir[in.dir] = append(byDir[in.dir], in)
	}
	sort.Strings(dirs)
	for _, d := range dirs {
		for _, part := range splitUnits(byDir[d], gap) {
			u := newIncident(part[0].world)
			for _, in := range part {
				if s := u.add(in); s != nil {
					skipped = append(skipped, *s)
				}
			}
			units = append(units, u)
		}
	}
	// Complete units first (they stand alone), then by world and time, so
	// that a node's directory meets the others of its moment.
	sort.SliceStable(units, func(i, j int) bool {
		a, b := units[i], units[j]
		if a.complete() != b.complete() {
			return a.complete()
		}
		if a.world != b.world {
			return a.world < b.world
		}
		return a.hi < b.hi
	})
	var out []*incident
	for _, u := range units {
		var into *incident
		best := -1
		for _, c := range out {
			if !c.joins(u, gap) {
				continue
			}
			if n := commonDepth(c.dirs, u.dirs[0]); n > best {
				into, best = c, n
			}
		}
		if into == nil {
			out = append(out, u)
			continue
		}
		for _, in := range u.dumps {
			if s := into.add(in); s != nil { // never: ranks are disjoint
				skipped = append(skipped, *s)
			}
		}
	}
	for _, c := range out {
		sort.Slice(c.dumps, func(i, j int) bool { return c.dumps[i].rank < c.dumps[j].rank })
		for i, in := range c.dumps {
			c.ranks[in.rank] = i
		}
		sort.Strings(c.dirs)
		c.name = commonDir(c.dirs)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].name != out[j].name {
			return out[i].name < out[j].name
		}
		return out[i].newest < out[j].newest
	})
	return out, skipped
}

// splitUnits splits one directory's dumps by world size, then where their
// newest entry times lie more than gap apart, then by pg_config (dumps that
// describe a group differently are of different jobs). A dump without
// entries joins a part of its world size whose pg_config agrees with its
// own, that lacks its rank, of its file name's prefix, the largest, the
// latest: in that order of preference.
func splitUnits(ins []input, gap time.Duration) [][]input {
	byWorld := map[int][]input{}
	var worlds []int
	for _, in := range ins {
		if _, ok := byWorld[in.world]; !ok {
			worlds = append(worlds, in.world)
		}
		byWorld[in.world] = append(byWorld[in.world], in)
	}
	sort.Ints(worlds)
	var out [][]input
	for _, w := range worlds {
		var timed, untimed []input
		for _, in := range byWorld[w] {
			if in.timed() {
				timed = append(timed, in)
			} else {
				untimed = append(untimed, in)
			}
		}
		sort.SliceStable(timed, func(i, j int) bool { return timed[i].newest < timed[j].newest })
		var parts []*part
		start := 0 // the first part of the current moment
		for i, in := range timed {
			if i > 0 && in.newest-timed[i-1].newest > int64(gap) {
				start = len(parts) // a new moment
			}
			// Within a moment, by pg_config: the dumps of one job agree.
			var into *part
			for _, p := range parts[start:] {
				if agree(p.pgs, in.records.PGConfig) {
					into = p
					break
				}
			}
			if into == nil {
				into = newPart()
				parts = append(parts, into)
			}
			into.add(in)
		}
		if len(untimed) > 0 && len(parts) == 0 {
			parts = append(parts, newPart())
		}
		for _, in := range untimed {
			best := 0
			for i := range parts {
				if fitsBetter(in, parts[i], parts[best]) {
					best = i
				}
			}
			parts[best].add(in)
		}
		for _, p := range parts {
			out = append(out, p.dumps)
		}
	}
	return out
}

// commonDir is the nearest directory holding all of dirs.
func commonDir(dirs []string) string {
	if len(dirs) == 0 {
		return ""
	}
	common := dirs[0]
	for _, d := range dirs[1:] {
		for !within(d, common) {
			parent := filepath.Dir(common)
			if parent == common {
				break
			}
			common = parent
		}
	}
	return common
}

// within reports whether path is dir or below it.
func within(path, dir string) bool {
	if path == dir || dir == "." && !filepath.IsAbs(path) && !strings.HasPrefix(path, "..") {
		return true
	}
	return strings.HasPrefix(path, strings.TrimSuffix(dir, string(filepath.Separator))+string(filepath.Separator))
}

// commonDepth is how many leading path elements dir shares with the
// nearest of dirs.
func commonDepth(dirs []string, dir string) int {
	best := 0
	b := strings.Split(filepath.ToSlash(dir), "/")
	for _, d := range dirs {
		a := strings.Split(filepath.ToSlash(d), "/")
		n := 0
		for n < len(a) && n < len(b) && a[n] == b[n] {
			n++
		}
		best = max(best, n)
	}
	return best
}

// dumpedAt estimates when the incident's dumps were written from the dumps
// themselves: they record no moment of their own, and torch writes them
// when the watchdog gives up on a collective, timeout_ms after it started,
// on every rank at once. So: the newest time any of them records plus the
// shortest timeout_ms of their entries. 0 (unknown: nothing is called
// stopped) when no entry records a time or a timeout.
func (c *incident) dumpedAt() int64 {
	timeout := c.timeout()
	if c.newest <= 0 || timeout <= 0 {
		return 0
	}
	return c.newest + int64(timeout)
}

// timeout is the shortest timeout_ms of the incident's entries; 0 when none
// records one.
func (c *incident) timeout() time.Duration {
	var ms int64
	for _, in := range c.dumps {
		for i := range in.records.Ops {
			if t := in.records.Ops[i].TimeoutMs; t > 0 && (ms == 0 || t < ms) {
				ms = t
			}
		}
	}
	return time.Duration(ms) * time.Millisecond
}

// part is a directory's dumps of one moment and one pg_config.
type part struct {
	dumps []input
	pgs   map[string]frdump.PGConfig
}

func newPart() *part { return &part{pgs: map[string]frdump.PGConfig{}} }

func (p *part) add(in input) {
	p.dumps = append(p.dumps, in)
	for name, g := range in.records.PGConfig {
		if _, ok := p.pgs[name]; !ok {
			p.pgs[name] = g
		}
	}
}

// fitsBetter reports whether the dump without entries in fits part a
// better than part b (see splitUnits).
func fitsBetter(in input, a, b *part) bool {
	for _, score := range []func(*part) int{
		func(p *part) int { return boolInt(agree(p.pgs, in.records.PGConfig)) },
		func(p *part) int { return boolInt(!hasRank(p.dumps, in.rank)) },
		func(p *part) int { return boolInt(hasPrefix(p.dumps, namePrefix(in.path))) },
		func(p *part) int { return len(p.dumps) },
	} {
		if x, y := score(a), score(b); x != y {
			return x > y
		}
	}
	return true // the later part on a tie
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func hasRank(p []input, rank int) bool {
	for _, in := range p {
		if in.rank == rank {
			return true
		}
	}
	return false
}

func hasPrefix(p []input, prefix string) bool {
	for _, in := range p {
		if namePrefix(in.path) == prefix {
			return true
		}
	}
	return false
}

// namePrefix is a dump's file name without its rank and extension: torch's
// TORCH_FR_DUMP_TEMP_FILE.
func namePrefix(path string) string {
	base := filepath.Base(path)
	if ext := filepath.Ext(base); ext == ".json" || ext == ".pkl" || ext == ".pickle" {
		base = strings.TrimSuffix(base, ext)
	}
	return strings.TrimRight(base, "0123456789")
}
