package main

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// key names one benchmark: its package's import path and its full name
// (sub-benchmarks included, without a -GOMAXPROCS suffix). Two packages may
// have benchmarks of the same name.
type key struct {
	pkg  string
	name string
}

func (k key) String() string { return shortPkg(k.pkg) + " " + k.name }

// result is what the gate compares of one benchmark: the iterations it ran
// and its allocation per op, as go test -benchmem prints them (B/op and
// allocs/op are whole numbers: the totals divided by the iterations,
// rounded down).
type result struct {
	iterations int64
	bytes      int64 // B/op
	allocs     int64 // allocs/op
}

// results are the benchmarks of a run or a baseline, by key, with the
// order they came in (the list's order) for printing.
type results struct {
	byKey map[key]result
	order []key
}

func newResults() *results { return &results{byKey: map[key]result{}} }

// add records r under k; a benchmark seen again (-count above 1) keeps the
// lower of each metric: allocation noise (a sync.Pool emptied by a
// collection, a map grown a little earlier) only ever adds.
func (rs *results) add(k key, r result) {
	old, ok := rs.byKey[k]
	if !ok {
		rs.byKey[k] = r
		rs.order = append(rs.order, k)
		return
	}
	old.bytes = min(old.bytes, r.bytes)
	old.allocs = min(old.allocs, r.allocs)
	rs.byKey[k] = old
}

// parseOutput reads go test -bench -benchmem output (or a baseline, which
// is in the same format): "pkg:" lines name the package of the benchmark
// lines that follow, other lines are ignored. procs is the -cpu value the
// run used: go test appends "-procs" to the names when it is not 1.
// Every benchmark line must carry B/op and allocs/op.
func parseOutput(r io.Reader, name string, procs int) (*results, error) {
	rs := newResults()
	suffix := ""
	if procs != 1 {
		suffix = "-" + strconv.Itoa(procs)
	}
	pkg := ""
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = strings.TrimSpace(p)
			continue
		}
		if !strings.HasPrefix(line, "Benchmark") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			// A name alone: the benchmark printed something before its
			// result, or failed; go test reports the failure itself.
			return nil, fmt.Errorf("%s:%d: a benchmark line without results: %q", name, n, line)
		}
		if pkg == "" {
			return nil, fmt.Errorf("%s:%d: benchmark %s before any \"pkg:\" line", name, n, f[0])
		}
		iters, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %s: iterations %q: %v", name, n, f[0], f[1], err)
		}
		res := result{iterations: iters, bytes: -1, allocs: -1}
		if (len(f)-2)%2 != 0 {
			return nil, fmt.Errorf("%s:%d: %s: want value-unit pairs after the iterations: %q", name, n, f[0], line)
		}
		for i := 2; i+1 < len(f); i += 2 {
			unit := f[i+1]
			if unit != "B/op" && unit != "allocs/op" {
				continue
			}
			v, err := strconv.ParseInt(f[i], 10, 64)
			if err != nil || v < 0 {
				return nil, fmt.Errorf("%s:%d: %s: %s %q: want a whole number", name, n, f[0], unit, f[i])
			}
			if unit == "B/op" {
				res.bytes = v
			} else {
				res.allocs = v
			}
		}
		if res.bytes < 0 || res.allocs < 0 {
			return nil, fmt.Errorf("%s:%d: %s: no B/op and allocs/op (run with -benchmem)", name, n, f[0])
		}
		bench := f[0]
		if suffix != "" {
			bench = strings.TrimSuffix(bench, suffix)
		}
		rs.add(key{pkg: pkg, name: bench}, res)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return rs, nil
}

// writeBaseline writes rs in go test -bench format: a header, then each
// package's "pkg:" line and its benchmarks with their iterations, B/op and
// allocs/op (no ns/op: time is not compared, and would only churn the
// file). Packages and benchmarks keep the run's order.
func writeBaseline(w io.Writer, rs *results, header []string) error {
	bw := bufio.NewWriter(w)
	for _, h := range header {
		fmt.Fprintf(bw, "# %s\n", h)
	}
	width := 0
	for _, k := range rs.order {
		width = max(width, len(k.name))
	}
	pkg := ""
	for _, k := range rs.order {
		if k.pkg != pkg {
			pkg = k.pkg
			fmt.Fprintf(bw, "\npkg: %s\n", pkg)
		}
		r := rs.byKey[k]
		fmt.Fprintf(bw, "%-*s\t%8d\t%12d B/op\t%9d allocs/op\n", width, k.name, r.iterations, r.bytes, r.allocs)
	}
	return bw.Flush()
}

// sortedKeys returns keys in a stable order (package, then name): for
// messages about sets.
func sortedKeys(ks []key) []key {
	out := append([]key(nil), ks...)
	sort.Slice(out, func(i, j int) bool {
		if out[i].pkg != out[j].pkg {
			return out[i].pkg < out[j].pkg
		}
		return out[i].name < out[j].name
	})
	return out
}

const module = "github.com/otelcol-gpu/otelcol-gpu/"

// shortPkg is the import path relative to the module, as the list names it.
func shortPkg(p string) string { return strings.TrimPrefix(p, module) }
