package slurm // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remediationexporter/internal/slurm"

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// maxHostlistNames bounds an expansion so a hostile or broken expression
// cannot exhaust memory.
const maxHostlistNames = 1 << 17

// hostlistContains reports whether the Slurm hostlist expression expr
// (gpu-node[1-4,07-09],login1, "ALL", "(null)") names node.
func hostlistContains(expr, node string) (bool, error) {
	expr = strings.TrimSpace(expr)
	if expr == "" || expr == "(null)" {
		return false, nil
	}
	if expr == "ALL" {
		return true, nil
	}
	names, err := expandHostlist(expr)
	if err != nil {
		return false, err
	}
	for _, n := range names {
		if n == node {
			return true, nil
		}
	}
	return false, nil
}

// expandHostlist expands a Slurm hostlist expression into names.
func expandHostlist(expr string) ([]string, error) {
	var out []string
	for _, item := range splitTopLevel(expr) {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		names, err := expandItem(item, maxHostlistNames-len(out))
		if err != nil {
			return nil, err
		}
		out = append(out, names...)
	}
	return out, nil
}

// splitTopLevel splits on commas outside brackets.
func splitTopLevel(s string) []string {
	var parts []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[':
			depth++
		case ']':
			if depth > 0 {
				depth--
			}
		case ',':
			if depth == 0 {
				parts = append(parts, s[start:i])
				start = i + 1
			}
		}
	}
	return append(parts, s[start:])
}

var errHostlistTooLarge = errors.New("slurm: hostlist expands to too many names")

// expandItem expands one item that may hold several bracket groups,
// e.g. rack[1-2]-gpu[01-04].
func expandItem(item string, budget int) ([]string, error) {
	open := strings.IndexByte(item, '[')
	if open < 0 {
		if strings.ContainsRune(item, ']') {
			return nil, fmt.Errorf("slurm: hostlist %q: unbalanced ']'", item)
		}
		if budget < 1 {
			return nil, errHostlistTooLarge
		}
		return []string{item}, nil
	}
	closing := strings.IndexByte(item[open:], ']')
	if closing < 0 {
		return nil, fmt.Errorf("slurm: hostlist %q: unbalanced '['", item)
	}
	closing += open
	prefix, ranges, rest := item[:open], item[open+1:closing], item[closing+1:]
	var numbers []string
	for _, r := range strings.Split(ranges, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		if !isRange {
			hi = lo
		}
		loN, err1 := strconv.Atoi(lo)
		hiN, err2 := strconv.Atoi(hi)
		if err1 != nil || err2 != nil || loN < 0 || hiN < loN {
			return nil, fmt.Errorf("slurm: hostlist %q: bad range %q", item, r)
		}
		if hiN-loN >= budget-len(numbers) {
			return nil, errHostlistTooLarge
		}
		width := len(lo) // Slurm keeps the low bound's zero padding
		for n := loN; n <= hiN; n++ {
			numbers = append(numbers, fmt.Sprintf("%0*d", width, n))
		}
	}
	tails, err := expandItem(rest, budget/max(len(numbers), 1))
	if err != nil {
		return nil, err
	}
	if len(numbers)*len(tails) > budget {
		return nil, errHostlistTooLarge
	}
	out := make([]string, 0, len(numbers)*len(tails))
	for _, n := range numbers {
		for _, t := range tails {
			out = append(out, prefix+n+t)
		}
	}
	return out, nil
}
