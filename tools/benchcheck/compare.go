package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// thresholds say when a metric has risen. A metric rose when both hold:
//
//	new > old * (1 + MaxRise)     the relative rise (10 %)
//	new - old >= MinAllocs        for allocs/op (1: a whole allocation)
//	new - old >= MinBytes         for B/op (64: noise on tiny values)
//
// The absolute slack keeps tiny bases sensible: 0 -> 1 allocs/op or 3 -> 4
// is a new allocation on every op, and fails; 24 -> 40 B/op (a pool's
// buffer grown once) does not, and a new allocation there shows in
// allocs/op anyway.
type thresholds struct {
	MaxRise   float64
	MinAllocs int64
	MinBytes  int64
}

var defaultThresholds = thresholds{MaxRise: 0.10, MinAllocs: 1, MinBytes: 64}

func (t thresholds) rose(old, new, minDelta int64) bool {
	return float64(new) > float64(old)*(1+t.MaxRise) && new-old >= minDelta
}

// fell is the mirror: a drop a new baseline should lock in.
func (t thresholds) fell(old, new, minDelta int64) bool {
	return float64(new) < float64(old)*(1-t.MaxRise) && old-new >= minDelta
}

// row is one benchmark in both the baseline and the run.
type row struct {
	key                   key
	old, new              result
	bytesRose, allocsRose bool
	bytesFell, allocsFell bool
}

// report is the comparison of a run with the baseline.
type report struct {
	rows []row
	// missing: in the baseline, not in the run (removed, renamed, or its
	// list line gone); extra: in the run, not in the baseline (new).
	missing, extra []key
	// iterations: run with another count than the baseline (the list's
	// count changed): B/op of benchmarks that amortize setup depends on it.
	iterations []row
}

func compare(base, run *results, t thresholds) report {
	var rep report
	for _, k := range run.order {
		nr := run.byKey[k]
		or, ok := base.byKey[k]
		if !ok {
			rep.extra = append(rep.extra, k)
			continue
		}
		r := row{key: k, old: or, new: nr,
			bytesRose:  t.rose(or.bytes, nr.bytes, t.MinBytes),
			allocsRose: t.rose(or.allocs, nr.allocs, t.MinAllocs),
			bytesFell:  t.fell(or.bytes, nr.bytes, t.MinBytes),
			allocsFell: t.fell(or.allocs, nr.allocs, t.MinAllocs),
		}
		if or.iterations != nr.iterations {
			rep.iterations = append(rep.iterations, r)
		}
		rep.rows = append(rep.rows, r)
	}
	for _, k := range base.order {
		if _, ok := run.byKey[k]; !ok {
			rep.missing = append(rep.missing, k)
		}
	}
	rep.missing, rep.extra = sortedKeys(rep.missing), sortedKeys(rep.extra)
	return rep
}

// rose returns the rows with a metric that rose.
func (rep report) rose() []row {
	var out []row
	for _, r := range rep.rows {
		if r.bytesRose || r.allocsRose {
			out = append(out, r)
		}
	}
	return out
}

func (rep report) failed() bool {
	return len(rep.rose()) > 0 || len(rep.missing) > 0 || len(rep.extra) > 0 || len(rep.iterations) > 0
}

// delta prints the change from old to new: a percentage, or the absolute
// change where old is 0.
func delta(old, new int64) string {
	switch {
	case old == new:
		return "0%"
	case old == 0:
		return fmt.Sprintf("+%d", new)
	}
	return fmt.Sprintf("%+.1f%%", (float64(new)/float64(old)-1)*100)
}

// print writes the table of every benchmark, then what failed and why.
func (rep report) print(w io.Writer, t thresholds, baselineName string) {
	width := len("benchmark")
	for _, r := range rep.rows {
		width = max(width, len(r.key.String()))
	}
	fmt.Fprintf(w, "%-*s  %12s %12s %8s  %10s %10s %8s\n", width, "benchmark", "B/op old", "new", "delta", "allocs old", "new", "delta")
	for _, r := range rep.rows {
		verdict := ""
		switch {
		case r.bytesRose || r.allocsRose:
			verdict = "  ROSE"
		case r.bytesFell || r.allocsFell:
			verdict = "  fell"
		}
		fmt.Fprintf(w, "%-*s  %12d %12d %8s  %10d %10d %8s%s\n", width, r.key, r.old.bytes, r.new.bytes, delta(r.old.bytes, r.new.bytes),
			r.old.allocs, r.new.allocs, delta(r.old.allocs, r.new.allocs), verdict)
	}

	rose := rep.rose()
	if len(rose) > 0 {
		fmt.Fprintf(w, "\nFAIL: %d benchmark(s) allocate more than the baseline allows (a rise of more than %.0f %%, and at least %d allocs/op or %d B/op):\n",
			len(rose), t.MaxRise*100, t.MinAllocs, t.MinBytes)
		for _, r := range rose {
			var what []string
			if r.allocsRose {
				what = append(what, fmt.Sprintf("allocs/op %d -> %d (%s)", r.old.allocs, r.new.allocs, delta(r.old.allocs, r.new.allocs)))
			}
			if r.bytesRose {
				what = append(what, fmt.Sprintf("B/op %d -> %d (%s)", r.old.bytes, r.new.bytes, delta(r.old.bytes, r.new.bytes)))
			}
			fmt.Fprintf(w, "  %s: %s\n", r.key, strings.Join(what, ", "))
		}
	}
	if len(rep.missing) > 0 {
		fmt.Fprintf(w, "\nFAIL: %d benchmark(s) in %s were not run (removed, renamed, or dropped from the list):\n", len(rep.missing), baselineName)
		for _, k := range rep.missing {
			fmt.Fprintf(w, "  %s\n", k)
		}
	}
	if len(rep.extra) > 0 {
		fmt.Fprintf(w, "\nFAIL: %d benchmark(s) ran that %s does not have (new, or renamed):\n", len(rep.extra), baselineName)
		for _, k := range rep.extra {
			fmt.Fprintf(w, "  %s\n", k)
		}
	}
	if len(rep.iterations) > 0 {
		fmt.Fprintf(w, "\nFAIL: %d benchmark(s) ran another number of iterations than %s was made with (the list changed):\n", len(rep.iterations), baselineName)
		for _, r := range rep.iterations {
			fmt.Fprintf(w, "  %s: %s now, %s in the baseline\n", r.key, strconv.FormatInt(r.new.iterations, 10)+"x", strconv.FormatInt(r.old.iterations, 10)+"x")
		}
	}
	if len(rep.missing) > 0 || len(rep.extra) > 0 || len(rep.iterations) > 0 {
		fmt.Fprintln(w, "  The baseline must match the list: make bench-baseline rewrites it; commit it with the change.")
	}
	if len(rose) > 0 {
		fmt.Fprintln(w, "  A rise that is intended: make bench-baseline, and commit the new baseline with the change that explains it.")
	}
	fell := 0
	for _, r := range rep.rows {
		if !(r.bytesRose || r.allocsRose) && (r.bytesFell || r.allocsFell) {
			fell++
		}
	}
	if fell > 0 {
		fmt.Fprintf(w, "\n%d benchmark(s) allocate less than the baseline (\"fell\"): make bench-baseline locks the gain in.\n", fell)
	}
}
