package childproc

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// start runs sh -c script and stops it when the test ends.
func start(t *testing.T, opts Options, script string) *Process {
	t.Helper()
	if opts.LogDir == "" {
		opts.LogDir = t.TempDir()
	}
	p, err := Start(opts, "sh", "-c", script)
	require.NoError(t, err)
	t.Cleanup(func() { p.Stop(time.Second) })
	return p
}

// waitLog waits until the child's log holds s: the script got that far.
func waitLog(t *testing.T, p *Process, s string) {
	t.Helper()
	require.Eventually(t, func() bool { return p.LogCount(s) > 0 }, 10*time.Second, 10*time.Millisecond, "%s never logged %q", p.Name(), s)
}

// Both output streams go to Name.log in LogDir; the exit status is kept.
func TestExitStatusAndLog(t *testing.T) {
	dir := t.TempDir()
	p := start(t, Options{Name: "fails", LogDir: dir}, "echo one; echo two >&2; echo two; exit 3")
	var exitErr *exec.ExitError
	require.ErrorAs(t, p.Err(), &exitErr)
	assert.Equal(t, 3, p.ExitCode())
	exited, err := p.Exited()
	assert.True(t, exited)
	assert.Equal(t, p.Err(), err)

	assert.Equal(t, filepath.Join(dir, "fails.log"), p.LogPath())
	tail, err := p.Tail(2)
	require.NoError(t, err)
	assert.Equal(t, "two\ntwo", tail)
	all, err := p.Tail(10)
	require.NoError(t, err)
	assert.Equal(t, "one\ntwo\ntwo", all)
	assert.Equal(t, 2, p.LogCount("two"))
	assert.Equal(t, []string{"sh", "-c", "echo one; echo two >&2; echo two; exit 3"}, p.Args())
	assert.ErrorIs(t, p.Kill(), os.ErrProcessDone, "a child that is gone is not signalled")
	assert.False(t, p.Stop(time.Second), "stopping a child that has exited does nothing")
}

// Env adds to the environment; Stdin and Stdout replace the log for those
// streams, stderr still goes to the log.
func TestEnvStdinStdout(t *testing.T) {
	var out bytes.Buffer
	p := start(t, Options{Name: "pipe", Env: []string{"CHILDPROC_TEST=value"}, Stdout: &out, Stdin: true},
		`cat; echo "$CHILDPROC_TEST"; echo "to the log" >&2`)
	_, err := p.Stdin().Write([]byte("hello\n"))
	require.NoError(t, err)
	require.NoError(t, p.Stdin().Close())
	require.NoError(t, p.Err())
	assert.Equal(t, 0, p.ExitCode())
	assert.Equal(t, "hello\nvalue\n", out.String())
	tail, err := p.Tail(5)
	require.NoError(t, err)
	assert.Equal(t, "to the log", tail)
}

func TestStartErrorNamesTheChild(t *testing.T) {
	_, err := Start(Options{Name: "missing", LogDir: t.TempDir()}, filepath.Join(t.TempDir(), "no-such-program"))
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "starting missing: "), err.Error())

	_, err = Start(Options{Name: "nolog", LogDir: filepath.Join(t.TempDir(), "no-such-dir")}, "true")
	assert.ErrorIs(t, err, os.ErrNotExist, "the log file cannot be created")
}

// A child that ends on SIGTERM is not killed.
func TestStopEndsOnSIGTERM(t *testing.T) {
	p := start(t, Options{Name: "sleeper"}, "exec sleep 60")
	exited, _ := p.Exited()
	require.False(t, exited)
	assert.Equal(t, -1, p.ExitCode(), "still running")
	assert.False(t, p.Stop(10*time.Second))
	var exitErr *exec.ExitError
	require.ErrorAs(t, p.Err(), &exitErr)
	status := exitErr.Sys().(syscall.WaitStatus)
	assert.Equal(t, syscall.SIGTERM, status.Signal())
	assert.Equal(t, -1, p.ExitCode(), "a signal ended it")
}

// A child that ignores SIGTERM is killed after the grace period, with its
// own children (its process group).
func TestStopKillsWhatIgnoresSIGTERM(t *testing.T) {
	p := start(t, Options{Name: "stubborn"}, `trap "" TERM; sleep 60 & echo "grandchild $!"; wait`)
	waitLog(t, p, "grandchild ")
	line, err := p.Tail(1)
	require.NoError(t, err)
	grandchild, err := strconv.Atoi(strings.TrimPrefix(line, "grandchild "))
	require.NoError(t, err)

	began := time.Now()
	assert.True(t, p.Stop(300*time.Millisecond))
	assert.GreaterOrEqual(t, time.Since(began), 300*time.Millisecond, "SIGKILL waits for the grace period")
	var exitErr *exec.ExitError
	require.ErrorAs(t, p.Err(), &exitErr)
	assert.Equal(t, syscall.SIGKILL, exitErr.Sys().(syscall.WaitStatus).Signal())
	assert.Eventually(t, func() bool { return gone(grandchild) }, 10*time.Second, 10*time.Millisecond,
		"the grandchild %d in the child's process group is killed too", grandchild)
}

// gone: no process pid, or only its zombie waiting for a reaper.
func gone(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return syscall.Kill(pid, 0) == syscall.ESRCH
	}
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && strings.HasPrefix(string(stat[i+1:]), " Z")
}

// StopAll signals every child first and kills only those still there once
// the shared grace period is over.
func TestStopAllKillsOnlyTheStubborn(t *testing.T) {
	polite := start(t, Options{Name: "polite"}, "exec sleep 60")
	stubborn := start(t, Options{Name: "stubborn"}, `trap "" TERM; echo ready; while :; do sleep 0.05; done`)
	waitLog(t, stubborn, "ready")
	killed := StopAll(300*time.Millisecond, stubborn, polite)
	assert.Equal(t, []*Process{stubborn}, killed)
	for _, p := range []*Process{polite, stubborn} {
		exited, _ := p.Exited()
		assert.True(t, exited, p.Name())
	}
}

// Wait is bounded by its context.
func TestWaitIsBounded(t *testing.T) {
	p := start(t, Options{Name: "sleeper"}, "exec sleep 60")
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	exited, err := p.Wait(ctx)
	assert.False(t, exited)
	assert.NoError(t, err)

	q := start(t, Options{Name: "quick", DieWithParent: true}, "exit 0")
	exited, err = q.Wait(context.Background())
	assert.True(t, exited)
	assert.NoError(t, err)
}

// Signal reaches the child itself: here a handler that exits with a code.
// SIGUSR1, not SIGHUP: a shell started with a signal ignored (under nohup,
// SIGHUP) cannot trap it, and a clean-clone CI run started under nohup
// waited here for ten minutes.
func TestSignal(t *testing.T) {
	p := start(t, Options{Name: "usr1"}, `trap "exit 7" USR1; echo ready; while :; do sleep 0.05; done`)
	waitLog(t, p, "ready")
	require.NoError(t, p.Signal(syscall.SIGUSR1))
	<-p.Done()
	assert.Equal(t, 7, p.ExitCode())
	assert.Error(t, p.Err())
	assert.True(t, errors.As(p.Err(), new(*exec.ExitError)))
}
