package verify

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/repair"
)

// script writes an executable shell script whose body may use $DIR (the
// test's directory) and $FIXTURES (testdata, absolute).
func script(t *testing.T, body string) (path, dir string) {
	t.Helper()
	dir = t.TempDir()
	fixtures, err := filepath.Abs("testdata")
	require.NoError(t, err)
	path = filepath.Join(dir, "fake-dcgmi")
	content := "#!/bin/sh\nDIR=" + dir + "\nFIXTURES=" + fixtures + "\n" + body + "\n"
	require.NoError(t, os.WriteFile(path, []byte(content), 0o755))
	return path, dir
}

func diagRequest(level int, gpus ...GPU) Request {
	return Request{Spec: repair.CheckSpec{Check: repair.CheckDiag, Level: level}, GPUs: gpus}
}

var twoGPUs = []GPU{{UUID: "GPU-a", Index: 0}, {UUID: "GPU-b", Index: 1}}

func commandRunner(t *testing.T, prog string, opts CommandDiagOptions) *DiagRunner {
	t.Helper()
	opts.Command = append([]string{prog}, DefaultDiagCommand[1:]...)
	r, err := NewCommandDiag(opts)
	require.NoError(t, err)
	return r
}

func TestCommandDiagPassAndArguments(t *testing.T) {
	prog, dir := script(t, `printf '%s\n' "$@" > "$DIR/args"; cat "$FIXTURES/dcgm4_r3_diagnostic_pass_issue215.json"`)
	r := commandRunner(t, prog, CommandDiagOptions{})
	res, err := r.Run(t.Context(), diagRequest(3, GPU{UUID: "GPU-a", Index: 0}, GPU{UUID: "GPU-h", Index: 7}))
	require.NoError(t, err)
	require.Len(t, res, 2)
	assert.True(t, res[0].Passed, res[0].Detail)
	assert.True(t, res[1].Passed, res[1].Detail)
	assert.Equal(t, "GPU-h", res[1].GPU)
	args, err := os.ReadFile(filepath.Join(dir, "args"))
	require.NoError(t, err)
	assert.Equal(t, "diag\n-r\n3\n-j\n-i\n0,7\n", string(args))
}

func TestCommandDiagFailingRun(t *testing.T) {
	// dcgmi exits non-zero when a test fails; the document decides.
	prog, _ := script(t, `cat "$FIXTURES/dcgm4_r2_memory_fail.json"; exit 226`)
	res, err := commandRunner(t, prog, CommandDiagOptions{}).Run(t.Context(), diagRequest(2, twoGPUs...))
	require.NoError(t, err)
	assert.True(t, res[0].Passed, res[0].Detail)
	assert.False(t, res[1].Passed)
	assert.Equal(t, "memory", res[1].Tests[0].Name)
}

func TestCommandDiagErrors(t *testing.T) {
	for _, c := range []struct {
		name, body string
		want       []string
	}{
		{"failing exit, clean document", `cat "$FIXTURES/dcgm4_r3_diagnostic_pass_issue215.json"; exit 1`, []string{"exited with status 1 but its JSON reports no failure"}},
		{"failing exit, no document", `echo "Error: unable to connect to host engine at localhost:5555" >&2; exit 255`, []string{"exited with status 255 and no readable result", "stderr: Error: unable to connect"}},
		{"clean exit, garbage", `echo hello`, []string{"does not start with a JSON object"}},
		{"clean exit, nothing", `true`, []string{"empty"}},
		{"clean exit, truncated", `head -c 700 "$FIXTURES/dcgm4_r2_memory_fail.json"`, []string{"truncated"}},
		{"unknown result", `printf '%s' '{"DCGM Diagnostic":{"test_categories":[{"category":"c","tests":[{"name":"memory","results":[{"entity_group":"GPU","entity_group_id":1,"entity_id":0,"status":"Inconclusive"}]}]}]}}'`, []string{`unknown result "Inconclusive"`}},
		{"runtime error", `cat "$FIXTURES/dcgm4_runtime_error.json"; exit 1`, []string{"runtime_error"}},
		{"too much output", `head -c 5000000 /dev/zero`, []string{"more than 4194304 bytes"}},
		{"killed by a signal", `kill -9 $$`, []string{"signal: killed"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			prog, _ := script(t, c.body)
			res, err := commandRunner(t, prog, CommandDiagOptions{}).Run(t.Context(), diagRequest(1, twoGPUs...))
			require.Error(t, err)
			assert.Nil(t, res)
			for _, w := range c.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestCommandDiagMissingCommand(t *testing.T) {
	for _, prog := range []string{filepath.Join(t.TempDir(), "dcgmi"), "dcgmi-not-installed-here"} {
		r, err := NewCommandDiag(CommandDiagOptions{Command: []string{prog, "diag", "-r", "{level}", "-j"}})
		require.NoError(t, err)
		_, err = r.Run(t.Context(), diagRequest(1, twoGPUs...))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "starting "+prog)
	}
}

// waitFile waits for the script to write a file (it runs by then).
func waitFile(t *testing.T, path string) string {
	t.Helper()
	var b []byte
	require.Eventually(t, func() bool {
		var err error
		b, err = os.ReadFile(path)
		return err == nil && strings.HasSuffix(string(b), "\n")
	}, time.Minute, 5*time.Millisecond)
	return strings.TrimSpace(string(b))
}

// gone reports whether pid no longer runs (absent, or a zombie nobody
// reaped yet).
func gone(pid string) bool {
	stat, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return true
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 0 && (fields[0] == "Z" || fields[0] == "X")
}

func TestCommandDiagCancelKillsTheGroup(t *testing.T) {
	prog, dir := script(t, `sleep 1000 & echo $! > "$DIR/child"; wait`)
	r := commandRunner(t, prog, CommandDiagOptions{KillGrace: time.Minute})
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := r.Run(ctx, diagRequest(1, twoGPUs...))
		errc <- err
	}()
	child := waitFile(t, filepath.Join(dir, "child"))
	cancel()
	err := <-errc
	require.Error(t, err)
	assert.ErrorIs(t, err, context.Canceled)
	require.Eventually(t, func() bool { return gone(child) }, time.Minute, 5*time.Millisecond, "the command's child %s survived", child)
}

func TestCommandDiagTermIgnoredThenKilled(t *testing.T) {
	prog, dir := script(t, `trap '' TERM; sleep 1000 & echo $! > "$DIR/child"; while :; do wait; done`)
	r := commandRunner(t, prog, CommandDiagOptions{KillGrace: 20 * time.Millisecond})
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := r.Run(ctx, diagRequest(1, twoGPUs...))
		errc <- err
	}()
	child := waitFile(t, filepath.Join(dir, "child"))
	cancel()
	require.ErrorIs(t, <-errc, context.Canceled)
	require.Eventually(t, func() bool { return gone(child) }, time.Minute, 5*time.Millisecond)
}

func TestCommandDiagTimeout(t *testing.T) {
	prog, _ := script(t, `exec sleep 1000`)
	r := commandRunner(t, prog, CommandDiagOptions{Timeouts: DiagTimeouts{Quick: 50 * time.Millisecond}, KillGrace: time.Minute})
	_, err := r.Run(t.Context(), diagRequest(1, twoGPUs...))
	require.Error(t, err)
	assert.True(t, errors.Is(err, errTimedOut), err)
	assert.Contains(t, err.Error(), "no result after 50ms")
	assert.False(t, errors.Is(err, context.Canceled))
}

func TestNewCommandDiagRefuses(t *testing.T) {
	for _, c := range []struct {
		name string
		opts CommandDiagOptions
		want string
	}{
		{"typo", CommandDiagOptions{Command: []string{"dcgmi", "diag", "-r", "{levle}"}}, `command[3] "{levle}": unknown placeholder`},
		{"stray brace", CommandDiagOptions{Command: []string{"dcgmi", "-i", "{gpus"}}, "unknown placeholder"},
		{"empty program", CommandDiagOptions{Command: []string{" ", "diag"}}, "command[0]"},
		{"negative grace", CommandDiagOptions{KillGrace: -time.Second}, "negative"},
		{"negative timeout", CommandDiagOptions{Timeouts: DiagTimeouts{Long: -time.Second}}, "long (level 3)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := NewCommandDiag(c.opts)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
	r, err := NewCommandDiag(CommandDiagOptions{})
	require.NoError(t, err)
	assert.Equal(t, DefaultDiagCommand, r.backend.(*commandBackend).argv)
}

func TestDiagRunnerRefusesBadRequests(t *testing.T) {
	r, err := NewCommandDiag(CommandDiagOptions{Command: []string{"/bin/false"}})
	require.NoError(t, err)
	for _, c := range []struct {
		name string
		req  Request
		want string
	}{
		{"level 0", diagRequest(0, twoGPUs...), "level 0"},
		{"level 4", diagRequest(4, twoGPUs...), "level 4"},
		{"other check", Request{Spec: repair.CheckSpec{Check: repair.CheckLinksSteady, Level: 1}, GPUs: twoGPUs}, "links_steady"},
		{"no GPU", diagRequest(1), "no GPU"},
		{"no UUID", diagRequest(1, GPU{Index: 0}), "no UUID"},
		{"twice", diagRequest(1, GPU{UUID: "a", Index: 0}, GPU{UUID: "a", Index: 1}), "twice"},
		{"index twice", diagRequest(1, GPU{UUID: "a", Index: 0}, GPU{UUID: "b", Index: 0}), "twice"},
		{"negative index", diagRequest(1, GPU{UUID: "a", Index: -1}), "out of range"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := r.Run(t.Context(), c.req)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

func TestDiagTimeoutsDefaults(t *testing.T) {
	var zero DiagTimeouts
	for level, want := range map[int]time.Duration{1: DefaultDiagTimeouts.Quick, 2: DefaultDiagTimeouts.Medium, 3: DefaultDiagTimeouts.Long} {
		assert.Equal(t, want, zero.forLevel(level), strconv.Itoa(level))
	}
	set := DiagTimeouts{Quick: time.Second, Medium: 2 * time.Second, Long: 3 * time.Second}
	assert.Equal(t, 2*time.Second, set.forLevel(2))
}
