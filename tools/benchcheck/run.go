package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// runner builds the test binaries of the listed packages and runs each
// list entry's benchmarks.
type runner struct {
	goCmd  string // the go command
	binDir string // where the test binaries go
	count  int    // -test.count: runs of each benchmark, the lower kept
	procs  int    // -test.cpu
	jobs   int    // entries run at once
	tmpDir string // TMPDIR of the benchmarks
	// command makes the command that runs a test binary; tests replace it.
	command func(ctx context.Context, bin string, args ...string) *exec.Cmd
}

// binary is the test binary go test -c -o DIR/ writes for a package
// directory: the last path element, .test.
func (r *runner) binary(dir string) string {
	return filepath.Join(r.binDir, path.Base(dir)+".test")
}

// build compiles every listed package's test binary with one go test -c
// (go builds them in parallel, from its cache when nothing changed).
func (r *runner) build(ctx context.Context, dirs []string) error {
	seen := map[string]string{}
	for _, d := range dirs {
		b := r.binary(d)
		if other, ok := seen[b]; ok {
			return fmt.Errorf("packages %s and %s would both build %s: go test -c cannot build both into one directory", other, d, b)
		}
		seen[b] = d
	}
	if err := os.MkdirAll(r.binDir, 0o755); err != nil {
		return err
	}
	// No vet (make lint vets) and no symbol tables (a quarter of the link's
	// time): neither changes what the code allocates.
	args := append([]string{"test", "-c", "-vet=off", "-ldflags=-s -w", "-o", r.binDir + string(filepath.Separator)}, dirs...)
	cmd := exec.CommandContext(ctx, r.goCmd, args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w", r.goCmd, strings.Join(args, " "), err)
	}
	return nil
}

// args are the test binary's flags for e: benchmarks only, a fixed number
// of iterations, allocations reported.
func (r *runner) args(e entry) []string {
	return []string{
		"-test.run", "^$",
		"-test.bench", e.bench,
		"-test.benchtime", strconv.Itoa(e.iterations) + "x",
		"-test.count", strconv.Itoa(r.count),
		"-test.cpu", strconv.Itoa(r.procs),
		"-test.benchmem",
		"-test.timeout", "10m",
	}
}

// benchEnv is what the benchmarks' environment pins, whatever the caller's:
// TMPDIR, since benchmarks that work under b.TempDir() allocate by the
// length of its path (the ib scrape's B/op is 22 % higher under a 50-byte
// TMPDIR than under /tmp); GOGC and GOMEMLIMIT, since collections empty
// sync.Pools and so decide how often pooled buffers are allocated anew.
func benchEnv(tmpDir string) []string {
	return []string{"TMPDIR=" + tmpDir, "GOGC=100", "GOMEMLIMIT=off"}
}

// outcome is one entry's run: its results and its raw output.
type outcome struct {
	res *results
	raw []byte
	err error
}

// runEntry runs e's benchmarks in its package directory (tests read their
// testdata relative to it).
func (r *runner) runEntry(ctx context.Context, e entry, listName string) outcome {
	var stdout, stderr bytes.Buffer
	cmd := r.command(ctx, r.binary(e.dir), r.args(e)...)
	cmd.Dir = e.dir
	cmd.Env = append(os.Environ(), benchEnv(r.tmpDir)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	raw := append(stdout.Bytes(), stderr.Bytes()...)
	where := fmt.Sprintf("%s:%d (%s %s)", listName, e.line, e.dir, e.bench)
	if err != nil {
		return outcome{raw: raw, err: fmt.Errorf("%s: %w\n%s", where, err, tail(raw, 4000))}
	}
	res, err := parseOutput(&stdout, e.dir, r.procs)
	if err != nil {
		return outcome{raw: raw, err: fmt.Errorf("%s: %w", where, err)}
	}
	if len(res.order) == 0 {
		return outcome{raw: raw, err: fmt.Errorf("%s: matched no benchmark (renamed or removed? fix the list)", where)}
	}
	for _, k := range res.order {
		if got := res.byKey[k].iterations; got != int64(e.iterations) {
			return outcome{raw: raw, err: fmt.Errorf("%s: %s ran %d iterations, not the %d asked: a benchmark that ignores b.N cannot be gated", where, k.name, got, e.iterations)}
		}
	}
	return outcome{res: res, raw: raw}
}

// runAll runs the entries, r.jobs at a time, and merges their results in
// the list's order. A benchmark matched by two entries is an error.
func (r *runner) runAll(ctx context.Context, list []entry, listName string) (*results, []byte, error) {
	outs := make([]outcome, len(list))
	sem := make(chan struct{}, max(r.jobs, 1))
	var wg sync.WaitGroup
	for i, e := range list {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			outs[i] = r.runEntry(ctx, e, listName)
		}()
	}
	wg.Wait()
	all := newResults()
	var raw []byte
	var errs []string
	for i, o := range outs {
		raw = append(raw, o.raw...)
		if o.err != nil {
			errs = append(errs, o.err.Error())
			continue
		}
		for _, k := range o.res.order {
			if _, dup := all.byKey[k]; dup {
				errs = append(errs, fmt.Sprintf("%s:%d: %s is matched by another line too", listName, list[i].line, k))
				continue
			}
			all.byKey[k] = o.res.byKey[k]
			all.order = append(all.order, k)
		}
	}
	if len(errs) > 0 {
		return nil, raw, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return all, raw, nil
}

// tail is the end of b, at most n bytes.
func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
