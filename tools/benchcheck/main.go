// Command benchcheck is the allocation gate of make bench-check (issue 32):
// it runs the hot-path benchmarks of a list and compares their B/op and
// allocs/op, which unlike time do not depend on the machine or its load,
// with a committed baseline.
//
//	go run ./tools/benchcheck            # make bench-check: compare, exit 1 on a rise
//	go run ./tools/benchcheck -update    # make bench-baseline: rewrite the baseline
//
// The list (benchmarks.txt beside this file) names a package directory, a
// -bench regexp and a fixed iteration count (-benchtime=Nx) a line. Each
// package's test binary is built once (go test -c) and each line run with
// -count 2 -cpu 1 -benchmem; of the runs of a benchmark the lower B/op and
// the lower allocs/op are kept, since allocation noise only adds.
//
// A benchmark fails when a metric rose by more than 10 % and by at least
// one allocation (allocs/op) or 64 bytes (B/op): see thresholds. A
// benchmark in the baseline that did not run, one that ran and is not in
// the baseline, or one run with another iteration count than the baseline
// is an error too: the baseline is kept in step with the list and the code.
//
// It exits 0 when nothing rose, 1 when something did or the baseline is out
// of step, 2 when it could not run.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("benchcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listPath := fs.String("list", "tools/benchcheck/benchmarks.txt", "the benchmarks to run: DIR REGEXP ITERATIONS a line")
	basePath := fs.String("baseline", "tools/benchcheck/baseline.txt", "the baseline: go test -bench output with B/op and allocs/op")
	update := fs.Bool("update", false, "rewrite the baseline from this run instead of comparing")
	count := fs.Int("count", 2, "runs of each benchmark (-test.count); the lower of each metric is kept")
	procs := fs.Int("cpu", 1, "GOMAXPROCS of the benchmarks (-test.cpu)")
	jobs := fs.Int("j", runtime.NumCPU(), "list lines run at once (allocation does not depend on it)")
	goCmd := fs.String("go", "go", "the go command")
	binDir := fs.String("bindir", "_build/benchcheck", "where the test binaries are built")
	tmpDir := fs.String("tmpdir", "/tmp", "TMPDIR of the benchmarks: the same path everywhere, as paths under it are allocated")
	rawPath := fs.String("raw", "", "also write the benchmarks' raw output to this file")
	t := defaultThresholds
	fs.Float64Var(&t.MaxRise, "max-rise", t.MaxRise, "the relative rise that fails (0.10: 10 %)")
	fs.Int64Var(&t.MinAllocs, "min-allocs", t.MinAllocs, "the least rise in allocs/op that fails")
	fs.Int64Var(&t.MinBytes, "min-bytes", t.MinBytes, "the least rise in B/op that fails")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "benchcheck: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if *count < 1 || *procs < 1 || t.MaxRise < 0 || t.MinAllocs < 0 || t.MinBytes < 0 {
		fmt.Fprintln(stderr, "benchcheck: -count and -cpu must be at least 1, the thresholds not negative")
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintln(stderr, "benchcheck:", err)
		return 2
	}

	listData, err := os.ReadFile(*listPath)
	if err != nil {
		return fail(err)
	}
	list, err := parseList(bytes.NewReader(listData), *listPath)
	if err != nil {
		return fail(err)
	}
	var base *results
	if !*update {
		// Read first: a missing or broken baseline is known before minutes
		// of benchmarks.
		f, err := os.Open(*basePath)
		if err != nil {
			return fail(fmt.Errorf("%w (make bench-baseline writes it)", err))
		}
		base, err = parseOutput(f, *basePath, 1)
		f.Close()
		if err != nil {
			return fail(err)
		}
	}

	// The binaries run in their package directories: an absolute path.
	absBin, err := filepath.Abs(*binDir)
	if err != nil {
		return fail(err)
	}
	r := &runner{goCmd: *goCmd, binDir: absBin, count: *count, procs: *procs, jobs: *jobs, tmpDir: *tmpDir, command: exec.CommandContext}
	start := time.Now()
	fmt.Fprintf(stderr, "benchcheck: building %d test binaries\n", len(packages(list)))
	if err := r.build(ctx, packages(list)); err != nil {
		return fail(err)
	}
	built := time.Now()
	fmt.Fprintf(stderr, "benchcheck: running %d list lines (-count %d -cpu %d, %d at once)\n", len(list), *count, *procs, *jobs)
	got, raw, err := r.runAll(ctx, list, *listPath)
	if *rawPath != "" {
		if werr := os.WriteFile(*rawPath, raw, 0o644); werr != nil && err == nil {
			err = werr
		}
	}
	if err != nil {
		return fail(err)
	}
	fmt.Fprintf(stderr, "benchcheck: %d benchmarks; build %.0fs, benchmarks %.0fs\n", len(got.order), built.Sub(start).Seconds(), time.Since(built).Seconds())

	if *update {
		if err := writeFileAtomic(*basePath, func(w io.Writer) error {
			return writeBaseline(w, got, []string{
				"The allocation baseline of make bench-check (tools/benchcheck): B/op and allocs/op",
				fmt.Sprintf("of the benchmarks in %s, the lower of %d runs each at -cpu %d.", filepath.ToSlash(*listPath), *count, *procs),
				"Written by make bench-baseline; rewrite it with the change that moves a number, never by hand.",
			})
		}); err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "benchcheck: wrote %s: %d benchmarks\n", *basePath, len(got.order))
		return 0
	}

	rep := compare(base, got, t)
	rep.print(stdout, t, *basePath)
	if rep.failed() {
		return 1
	}
	fmt.Fprintf(stdout, "\nbenchcheck: ok, %d benchmarks within %.0f %% of %s\n", len(rep.rows), t.MaxRise*100, *basePath)
	return 0
}

// writeFileAtomic writes a file through a temporary one beside it, so a
// failed or interrupted run never leaves half a baseline.
func writeFileAtomic(name string, write func(io.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), name)
}
