package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeGo writes a go command that "builds" every package's test binary as
// a copy of this test binary (which then acts as fakeBench).
func fakeGo(t *testing.T) string {
	self, err := os.Executable()
	require.NoError(t, err)
	script := filepath.Join(t.TempDir(), "go")
	require.NoError(t, os.WriteFile(script, []byte(`#!/bin/sh
# go test -c -vet=off -ldflags=... -o DIR/ PKG...
shift 4
[ "$1" = -o ] || { echo "fake go: want -o, got $1" >&2; exit 2; }
out=$2; shift 2
for d in "$@"; do ln -sf "`+self+`" "$out$(basename "$d").test" || exit 1; done
`), 0o755))
	return script
}

// TestRunEndToEnd: make bench-baseline then make bench-check on fake
// packages; then a baseline that allocated less, and one out of step.
func TestRunEndToEnd(t *testing.T) {
	t.Setenv(fakeEnv, "ok")
	root := t.TempDir()
	t.Chdir(root)
	require.NoError(t, os.MkdirAll("pkg/one", 0o755))
	require.NoError(t, os.MkdirAll("pkg/two", 0o755))
	require.NoError(t, os.WriteFile("list.txt", []byte("./pkg/one ^BenchmarkA$ 10x\n./pkg/two ^BenchmarkB$ 20x\n"), 0o644))
	common := []string{"-go", fakeGo(t), "-list", "list.txt", "-baseline", "baseline.txt", "-j", "1"}
	var stdout, stderr bytes.Buffer

	// No baseline yet: refused before anything runs.
	code := run(context.Background(), common, &stdout, &stderr)
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr.String(), "(make bench-baseline writes it)")

	stdout.Reset()
	stderr.Reset()
	code = run(context.Background(), append(common, "-update"), &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())
	assert.Contains(t, stdout.String(), "wrote baseline.txt: 3 benchmarks")
	base, err := os.ReadFile("baseline.txt")
	require.NoError(t, err)
	assert.Contains(t, string(base), "# Written by make bench-baseline")
	assert.Regexp(t, `\npkg: example.com/fake\nBenchmarkA/one\s+10\s+64 B/op\s+2 allocs/op\n`, string(base))
	assert.Equal(t, 1, strings.Count(string(base), "pkg: "), "one package, though two directories: go test prints the import path")

	stdout.Reset()
	stderr.Reset()
	code = run(context.Background(), common, &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String()+stdout.String())
	assert.Contains(t, stdout.String(), "benchcheck: ok, 3 benchmarks within 10 % of baseline.txt")

	// A baseline from before an allocation was added to BenchmarkA/two.
	lower := strings.Replace(string(base), "128 B/op", "100 B/op", 1)
	lower = regexp.MustCompile(`(BenchmarkA/two\s+10\s+100 B/op\s+)3 allocs/op`).ReplaceAllString(lower, "${1}2 allocs/op")
	require.NoError(t, os.WriteFile("baseline.txt", []byte(lower), 0o644))
	stdout.Reset()
	stderr.Reset()
	code = run(context.Background(), common, &stdout, &stderr)
	assert.Equal(t, 1, code)
	assert.Contains(t, stdout.String(), "FAIL: 1 benchmark(s) allocate more")
	assert.Contains(t, stdout.String(), "  example.com/fake BenchmarkA/two: allocs/op 2 -> 3 (+50.0%)\n")

	// The list changed, the baseline did not.
	require.NoError(t, os.WriteFile("baseline.txt", base, 0o644))
	require.NoError(t, os.WriteFile("list.txt", []byte("./pkg/one ^BenchmarkA$/^one$ 10x\n./pkg/two ^BenchmarkB$ 30x\n"), 0o644))
	stdout.Reset()
	stderr.Reset()
	code = run(context.Background(), common, &stdout, &stderr)
	assert.Equal(t, 1, code)
	assert.Contains(t, stdout.String(), "were not run (removed, renamed, or dropped from the list):\n  example.com/fake BenchmarkA/two\n")
	assert.Contains(t, stdout.String(), "  example.com/fake BenchmarkB: 30x now, 20x in the baseline\n")
}

func TestRunRefuses(t *testing.T) {
	dir := t.TempDir()
	list := filepath.Join(dir, "list.txt")
	require.NoError(t, os.WriteFile(list, []byte("./a ^BenchmarkA$ 1s\n"), 0o644))
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"a flag", []string{"-nope"}, "flag provided but not defined: -nope"},
		{"an argument", []string{"extra"}, `unexpected arguments ["extra"]`},
		{"count", []string{"-count", "0"}, "-count and -cpu must be at least 1"},
		{"no list", []string{"-list", filepath.Join(dir, "none.txt")}, "none.txt: no such file or directory"},
		{"bad list", []string{"-list", list}, `list.txt:1: iterations "1s"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			assert.Equal(t, 2, run(context.Background(), c.args, &stdout, &stderr))
			assert.Contains(t, stderr.String(), c.want)
		})
	}
}

// The committed list and baseline are in step, as far as can be told
// without running the benchmarks (make bench-check runs them): every
// list line names a package with benchmarks whose top-level names its
// regexp matches, and the baseline has results for each line and for no
// package the list does not name.
func TestCommittedListAndBaseline(t *testing.T) {
	data, err := os.ReadFile("benchmarks.txt")
	require.NoError(t, err)
	list, err := parseList(bytes.NewReader(data), "benchmarks.txt")
	require.NoError(t, err)
	f, err := os.Open("baseline.txt")
	require.NoError(t, err)
	defer f.Close()
	base, err := parseOutput(f, "baseline.txt", 1)
	require.NoError(t, err)

	modRoot := filepath.Join("..", "..")
	gomod, err := os.ReadFile(filepath.Join(modRoot, "go.mod"))
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(gomod), "module "+strings.TrimSuffix(module, "/")+"\n"), "module is go.mod's")

	benchFunc := regexp.MustCompile(`(?m)^func (Benchmark\w*)\(`)
	listed := map[string]bool{}
	for _, e := range list {
		pkg := module + strings.TrimPrefix(e.dir, "./")
		listed[pkg] = true
		files, err := filepath.Glob(filepath.Join(modRoot, e.dir, "*_test.go"))
		require.NoError(t, err)
		var funcs []string
		for _, name := range files {
			src, err := os.ReadFile(name)
			require.NoError(t, err)
			for _, m := range benchFunc.FindAllStringSubmatch(string(src), -1) {
				funcs = append(funcs, m[1])
			}
		}
		top := regexp.MustCompile(strings.Split(e.bench, "/")[0])
		matched := false
		for _, fn := range funcs {
			matched = matched || top.MatchString(fn)
		}
		assert.True(t, matched, "benchmarks.txt:%d: %s has no benchmark function that %s matches", e.line, e.dir, e.bench)

		inBaseline := false
		for _, k := range base.order {
			if k.pkg == pkg && benchMatches(e.bench, k.name) {
				inBaseline = true
				assert.Equal(t, int64(e.iterations), base.byKey[k].iterations, "baseline.txt: %s: the list's iterations (make bench-baseline)", k)
			}
		}
		assert.True(t, inBaseline, "benchmarks.txt:%d: no result in baseline.txt (make bench-baseline)", e.line)
	}
	for _, k := range base.order {
		assert.True(t, listed[k.pkg], "baseline.txt: %s: its package is not in the list (make bench-baseline)", k)
	}
}

// benchMatches tells whether go test -bench pattern runs the benchmark
// name: pattern and name split at slashes, each level of the pattern
// matching the name's level (a name may have more levels).
func benchMatches(pattern, name string) bool {
	names := strings.Split(name, "/")
	for i, p := range strings.Split(pattern, "/") {
		if i >= len(names) || !regexp.MustCompile(p).MatchString(names[i]) {
			return false
		}
	}
	return true
}

func TestBenchMatches(t *testing.T) {
	assert.True(t, benchMatches("^BenchmarkA$", "BenchmarkA/one"))
	assert.True(t, benchMatches("^BenchmarkA$/^one$", "BenchmarkA/one"))
	assert.False(t, benchMatches("^BenchmarkA$/^one$", "BenchmarkA/two"))
	assert.False(t, benchMatches("^BenchmarkA$/^one$", "BenchmarkA"))
	assert.True(t, benchMatches("A", "BenchmarkAB"))
}
