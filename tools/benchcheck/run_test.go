package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// fakeEnv makes this test binary act as a package's test binary (fakeBench)
// when the runner runs it: the value says how.
const fakeEnv = "BENCHCHECK_FAKE_BENCH"

func TestMain(m *testing.M) {
	if mode := os.Getenv(fakeEnv); mode != "" {
		os.Exit(fakeBench(mode, os.Args[1:]))
	}
	goleak.VerifyTestMain(m)
}

// fakeBench prints what a test binary prints for -test.bench: two
// benchmarks, BenchmarkA (two sub-benchmarks) and BenchmarkB, each run
// -test.count times, the first run allocating more. mode: "ok"; "fail":
// BenchmarkB fails; "env": BenchmarkA's B/op is the length of TMPDIR plus
// GOGC; "ignoreN": BenchmarkB runs 7 iterations whatever it is asked.
func fakeBench(mode string, args []string) int {
	flags := map[string]string{}
	for i := 0; i+1 < len(args); i++ {
		if strings.HasPrefix(args[i], "-test.") && !strings.HasPrefix(args[i+1], "-test.") {
			flags[args[i]] = args[i+1]
		}
	}
	if flags["-test.run"] != "^$" || flags["-test.cpu"] != "1" || !strings.Contains(strings.Join(args, " "), "-test.benchmem") {
		fmt.Fprintf(os.Stderr, "unexpected arguments %q\n", args)
		return 3
	}
	pattern := flags["-test.bench"]
	top := regexp.MustCompile(strings.Split(pattern, "/")[0])
	iters := strings.TrimSuffix(flags["-test.benchtime"], "x")
	count := 1
	fmt.Sscan(flags["-test.count"], &count)
	fmt.Println("goos: linux\ngoarch: amd64\npkg: example.com/fake\ncpu: fake")
	for run := range count {
		extra := 100 * (count - 1 - run) // the first runs allocate more
		if top.MatchString("BenchmarkA") {
			bytes := 64 + extra
			if mode == "env" {
				bytes = len(os.Getenv("TMPDIR"))*1000 + len(os.Getenv("GOGC"))
			}
			if benchMatches(pattern, "BenchmarkA/one") {
				fmt.Printf("BenchmarkA/one \t %s \t 1000 ns/op \t %d B/op \t %d allocs/op\n", iters, bytes, 2+extra)
			}
			if benchMatches(pattern, "BenchmarkA/two") {
				fmt.Printf("BenchmarkA/two \t %s \t 1000 ns/op \t 3.5 things/op \t %d B/op \t %d allocs/op\n", iters, 128+extra, 3)
			}
		}
		if top.MatchString("BenchmarkB") {
			if mode == "fail" {
				fmt.Println("--- FAIL: BenchmarkB\n    fake_test.go:1: it broke")
				fmt.Println("FAIL")
				return 1
			}
			if mode == "ignoreN" {
				iters = "7"
			}
			fmt.Printf("BenchmarkB \t %s \t 1000 ns/op \t %d B/op \t %d allocs/op\n", iters, 0, 0)
		}
	}
	fmt.Println("PASS")
	return 0
}

// fakeRunner runs this binary as every package's test binary.
func fakeRunner(t *testing.T, mode string) *runner {
	t.Setenv(fakeEnv, mode)
	self, err := os.Executable()
	require.NoError(t, err)
	return &runner{binDir: t.TempDir(), count: 2, procs: 1, jobs: 2, tmpDir: "/tmp",
		command: func(ctx context.Context, _ string, args ...string) *exec.Cmd {
			return exec.CommandContext(ctx, self, args...)
		}}
}

func TestRunAll(t *testing.T) {
	r := fakeRunner(t, "ok")
	dir := t.TempDir()
	list := []entry{
		{line: 1, dir: dir, bench: "^BenchmarkB$", iterations: 20},
		{line: 2, dir: dir, bench: "^BenchmarkA$", iterations: 10},
	}
	rs, raw, err := r.runAll(context.Background(), list, "list.txt")
	require.NoError(t, err)
	assert.Contains(t, string(raw), "pkg: example.com/fake")
	a1, a2, b := key{"example.com/fake", "BenchmarkA/one"}, key{"example.com/fake", "BenchmarkA/two"}, key{"example.com/fake", "BenchmarkB"}
	assert.Equal(t, []key{b, a1, a2}, rs.order, "the list's order")
	assert.Equal(t, result{iterations: 10, bytes: 64, allocs: 2}, rs.byKey[a1], "the lower of the two runs")
	assert.Equal(t, result{iterations: 10, bytes: 128, allocs: 3}, rs.byKey[a2])
	assert.Equal(t, result{iterations: 20}, rs.byKey[b])
}

func TestRunAllErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, mode string
		list       []entry
		want       []string
	}{
		{"matched nothing", "ok", []entry{{line: 4, dir: dir, bench: "^BenchmarkGone$", iterations: 1}},
			[]string{"list.txt:4 (" + dir + " ^BenchmarkGone$): matched no benchmark (renamed or removed? fix the list)"}},
		{"matched twice", "ok", []entry{{line: 1, dir: dir, bench: "^BenchmarkA$", iterations: 1}, {line: 2, dir: dir, bench: "A", iterations: 1}},
			[]string{"list.txt:2: example.com/fake BenchmarkA/one is matched by another line too"}},
		{"failed", "fail", []entry{{line: 3, dir: dir, bench: "^BenchmarkB$", iterations: 1}},
			[]string{"list.txt:3 (" + dir + " ^BenchmarkB$): exit status 1", "--- FAIL: BenchmarkB", "it broke"}},
		{"ignores b.N", "ignoreN", []entry{{line: 5, dir: dir, bench: ".", iterations: 100}},
			[]string{"list.txt:5 (" + dir + " .): BenchmarkB ran 7 iterations, not the 100 asked"}},
		{"no directory", "ok", []entry{{line: 6, dir: dir + "/gone", bench: ".", iterations: 1}},
			[]string{"list.txt:6 (" + dir + "/gone .):"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := fakeRunner(t, c.mode)
			_, _, err := r.runAll(context.Background(), c.list, "list.txt")
			require.Error(t, err)
			for _, w := range c.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

// The benchmarks' TMPDIR and GOGC are the runner's, not the caller's.
func TestRunPinsEnvironment(t *testing.T) {
	r := fakeRunner(t, "env")
	t.Setenv("TMPDIR", "/a/much/longer/temporary/directory")
	t.Setenv("GOGC", "off")
	rs, _, err := r.runAll(context.Background(), []entry{{line: 1, dir: t.TempDir(), bench: "^BenchmarkA$", iterations: 1}}, "list.txt")
	require.NoError(t, err)
	assert.Equal(t, int64(len("/tmp")*1000+len("100")), rs.byKey[key{"example.com/fake", "BenchmarkA/one"}].bytes)
}

func TestBuildRefusesCollidingBinaries(t *testing.T) {
	r := &runner{goCmd: "false", binDir: t.TempDir()}
	err := r.build(context.Background(), []string{"./a/internal/rules", "./b/rules"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "packages ./a/internal/rules and ./b/rules would both build")
}
