package main

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// entry is one line of the benchmark list: the benchmarks of one package
// that a regexp selects (as go test -bench takes it), run a fixed number
// of iterations (-benchtime=Nx).
type entry struct {
	line       int    // in the list file, for messages
	dir        string // the package directory, relative to the module root: ./receiver/ibreceiver
	bench      string // the -bench regexp
	iterations int
}

// parseList reads the benchmark list: one "DIR REGEXP ITERATIONS" a line,
// blank lines and #-comments ignored.
func parseList(r io.Reader, name string) ([]entry, error) {
	var out []entry
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		n++
		text := sc.Text()
		if i := strings.IndexByte(text, '#'); i >= 0 {
			text = text[:i]
		}
		f := strings.Fields(text)
		if len(f) == 0 {
			continue
		}
		if len(f) != 3 {
			return nil, fmt.Errorf("%s:%d: want \"DIR REGEXP ITERATIONS\", got %d fields", name, n, len(f))
		}
		e := entry{line: n, dir: f[0], bench: f[1]}
		if !strings.HasPrefix(e.dir, "./") || strings.Contains(e.dir, "...") {
			return nil, fmt.Errorf("%s:%d: package %q: want one directory relative to the module root, as ./receiver/ibreceiver", name, n, e.dir)
		}
		e.dir = strings.TrimSuffix(e.dir, "/")
		// go test splits the -bench regexp at slashes, one regexp per level.
		for _, part := range strings.Split(e.bench, "/") {
			if _, err := regexp.Compile(part); err != nil {
				return nil, fmt.Errorf("%s:%d: benchmark regexp %q: %v", name, n, e.bench, err)
			}
		}
		it, ok := strings.CutSuffix(f[2], "x")
		iters, err := strconv.Atoi(it)
		if !ok || err != nil || iters < 1 {
			return nil, fmt.Errorf("%s:%d: iterations %q: want a count as -benchtime takes it, as 100x", name, n, f[2])
		}
		e.iterations = iters
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no benchmarks listed", name)
	}
	return out, nil
}

// packages returns the list's package directories, each once, in order.
func packages(list []entry) []string {
	seen := map[string]bool{}
	var dirs []string
	for _, e := range list {
		if !seen[e.dir] {
			seen[e.dir] = true
			dirs = append(dirs, e.dir)
		}
	}
	return dirs
}
