package main

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// filter is what --ranks and --pg keep of the findings: a finding is
// reported when it names one of the ranks (or no rank at all is asked for)
// and is about the process group (or none is asked for). The analysis
// itself always runs on every dump: a culprit is found only among all of
// its peers.
type filter struct {
	ranks    map[int]bool // nil: every rank
	rankText string
	pg       string // "": every group; a pg_config name (the PG id) or description
}

// maxRankSpan bounds a --ranks range, so that a typo (0-99999999) is an
// error rather than a map of a hundred million entries.
const maxRankSpan = 1 << 20

// parseRanks reads --ranks: ranks and ranges, comma-separated ("0-3,9").
func parseRanks(s string) (map[int]bool, error) {
	out := map[int]bool{}
	bad := func(part, why string) error {
		return fmt.Errorf("--ranks %q: %q %s (want ranks and ranges separated by commas, e.g. 0-3,9)", s, part, why)
	}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			return nil, bad(part, "is empty")
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(strings.TrimSpace(lo))
		if err != nil || a < 0 {
			return nil, bad(part, "is not a rank")
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(strings.TrimSpace(hi)); err != nil || b < 0 {
				return nil, bad(part, "is not a range of ranks")
			}
			if b < a {
				return nil, bad(part, "ends before it starts")
			}
			if b-a >= maxRankSpan {
				return nil, bad(part, fmt.Sprintf("spans more than %d ranks", maxRankSpan))
			}
		}
		for r := a; r <= b; r++ {
			out[r] = true
		}
	}
	return out, nil
}

// checkAgainst makes a filter that names nothing the dumps hold an error,
// so that a typo does not read as a clean bill.
func (f filter) checkAgainst(incidents []*incident) error {
	if f.ranks != nil {
		found := false
		for _, c := range incidents {
			for r := range c.ranks {
				found = found || f.ranks[r]
			}
		}
		if !found {
			return fmt.Errorf("--ranks %q: no dump read is of those ranks (read: %s)", f.rankText, ranges(readRanks(incidents)))
		}
	}
	if f.pg != "" {
		for _, c := range incidents {
			for name, g := range c.pgs {
				if name == f.pg || strings.EqualFold(g.Desc, f.pg) {
					return nil
				}
			}
		}
		return fmt.Errorf("--pg %q: no process group of the dumps read has that id (pg_config name, e.g. 72) or description (e.g. EXPERT_MODEL_PARALLEL_GROUP)", f.pg)
	}
	return nil
}

func readRanks(incidents []*incident) []int {
	seen := map[int]bool{}
	for _, c := range incidents {
		for r := range c.ranks {
			seen[r] = true
		}
	}
	out := make([]int, 0, len(seen))
	for r := range seen {
		out = append(out, r)
	}
	sort.Ints(out)
	return out
}

// keeps reports whether the finding is reported.
func (f filter) keeps(fd finding) bool {
	if f.ranks != nil {
		hit := false
		for _, r := range fd.Ranks {
			hit = hit || f.ranks[r]
		}
		if !hit {
			return false
		}
	}
	if f.pg != "" && !fd.aboutGroup(f.pg) {
		return false
	}
	return true
}

// aboutGroup reports whether the finding is about process group pg (its
// pg_config name or description): its own group, or, for a hang that
// spans groups, one of the groups its evidence names.
func (fd finding) aboutGroup(pg string) bool {
	if fd.PGName == pg || strings.EqualFold(fd.PGDesc, pg) {
		return true
	}
	for _, g := range fd.Groups {
		if g.Name == pg || strings.EqualFold(g.Desc, pg) {
			return true
		}
	}
	return false
}
