package verify

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// DefaultDiagCommand is the command the command backend runs: dcgmi
// against the local host engine, JSON out, on the GPUs to verify.
var DefaultDiagCommand = []string{"dcgmi", "diag", "-r", "{level}", "-j", "-i", "{gpus}"}

// Placeholders the command template expands.
const (
	placeholderLevel = "{level}"
	placeholderGPUs  = "{gpus}" // comma-separated driver indexes
)

// DefaultKillGrace is how long a cancelled command has after SIGTERM
// (dcgmi stops the diagnostic in the host engine on it) before its process
// group is killed.
const DefaultKillGrace = 10 * time.Second

// maxStderrBytes bounds the command's stderr kept for an error message.
const maxStderrBytes = 16 << 10

// CommandDiagOptions configure the command backend.
type CommandDiagOptions struct {
	// Command is the program and its arguments, no shell: {level} becomes
	// the level and {gpus} the GPUs' driver indexes, comma-separated (DCGM
	// numbers GPUs as the driver does). Empty: DefaultDiagCommand. Its
	// stdout must be `dcgmi diag -j`'s JSON document.
	Command []string
	// Timeouts per level; zero values take DefaultDiagTimeouts.
	Timeouts DiagTimeouts
	// KillGrace is the time between SIGTERM and SIGKILL on cancel; zero
	// takes DefaultKillGrace.
	KillGrace time.Duration
	DiagOptions
}

// NewCommandDiag returns the DiagRunner that runs a command and parses its
// JSON. The template is checked here: an unknown {placeholder} is an
// error, so a typo does not reach the command line.
func NewCommandDiag(opts CommandDiagOptions) (*DiagRunner, error) {
	argv := opts.Command
	if len(argv) == 0 {
		argv = DefaultDiagCommand
	}
	if strings.TrimSpace(argv[0]) == "" {
		return nil, errors.New("dcgm_diag command: the program (command[0]) is empty")
	}
	for i, a := range argv {
		if err := checkPlaceholders(a); err != nil {
			return nil, fmt.Errorf("dcgm_diag command[%d] %q: %w", i, a, err)
		}
	}
	if opts.KillGrace < 0 {
		return nil, fmt.Errorf("dcgm_diag kill grace: %s is negative", opts.KillGrace)
	}
	grace := opts.KillGrace
	if grace == 0 {
		grace = DefaultKillGrace
	}
	return newDiagRunner(&commandBackend{argv: append([]string(nil), argv...), grace: grace}, opts.Timeouts, opts.DiagOptions)
}

// checkPlaceholders refuses a {name} that is not {level} or {gpus}.
func checkPlaceholders(arg string) error {
	rest := strings.ReplaceAll(strings.ReplaceAll(arg, placeholderLevel, ""), placeholderGPUs, "")
	if i := strings.IndexAny(rest, "{}"); i >= 0 {
		return fmt.Errorf("unknown placeholder near %q (known: %s, %s)", rest[i:], placeholderLevel, placeholderGPUs)
	}
	return nil
}

type commandBackend struct {
	argv  []string
	grace time.Duration
}

func (b *commandBackend) expand(level int, gpus []GPU) []string {
	idx := make([]string, len(gpus))
	for i, g := range gpus {
		idx[i] = strconv.Itoa(g.Index)
	}
	rep := strings.NewReplacer(placeholderLevel, strconv.Itoa(level), placeholderGPUs, strings.Join(idx, ","))
	out := make([]string, len(b.argv))
	for i, a := range b.argv {
		out[i] = rep.Replace(a)
	}
	return out
}

func (b *commandBackend) run(ctx context.Context, level int, gpus []GPU) (*DiagReport, []int, error) {
	argv := b.expand(level, gpus)
	stdout := &boundedBuffer{max: MaxDiagOutput}
	stderr := &boundedBuffer{max: maxStderrBytes}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = commandSysProcAttr()
	// A grandchild that left the group and kept the pipes open cannot hold
	// Wait for longer than this.
	cmd.WaitDelay = b.grace
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("starting %s: %w", argv[0], err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var waitErr error
	select {
	case waitErr = <-done:
	case <-ctx.Done():
		b.stop(cmd.Process.Pid, done)
		return nil, nil, fmt.Errorf("%s stopped: %w", argv[0], context.Cause(ctx))
	}
	if stdout.overflow {
		return nil, nil, fmt.Errorf("%s wrote more than %d bytes on stdout: not a diagnostic document", argv[0], MaxDiagOutput)
	}
	rep, parseErr := ParseDiagJSON(stdout.buf)
	var exitErr *exec.ExitError
	switch {
	case waitErr != nil && !errors.As(waitErr, &exitErr):
		return nil, nil, fmt.Errorf("%s: %w%s", argv[0], waitErr, stderrTail(stderr))
	case exitErr != nil && !exitErr.Exited():
		// Killed by a signal nobody here sent: whatever it wrote is partial.
		return nil, nil, fmt.Errorf("%s: %s%s", argv[0], exitErr, stderrTail(stderr))
	case parseErr != nil && exitErr != nil:
		return nil, nil, fmt.Errorf("%s exited with status %d and no readable result (%v)%s", argv[0], exitErr.ExitCode(), parseErr, stderrTail(stderr))
	case parseErr != nil:
		return nil, nil, fmt.Errorf("%s: %w%s", argv[0], parseErr, stderrTail(stderr))
	}
	ids := make([]int, len(gpus))
	for i, g := range gpus {
		ids[i] = g.Index
	}
	if exitErr != nil && rep.allPass(ids) {
		// dcgmi exits non-zero when a test fails; a failing exit with a
		// clean document is a contradiction, and a contradiction is no pass.
		return nil, nil, fmt.Errorf("%s exited with status %d but its JSON reports no failure%s", argv[0], exitErr.ExitCode(), stderrTail(stderr))
	}
	return rep, ids, nil
}

// stop ends the command's process group: SIGTERM (dcgmi then stops the
// diagnostic in the host engine), SIGKILL after the grace, and waits for
// the command to be reaped.
func (b *commandBackend) stop(pid int, done <-chan error) {
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	t := time.NewTimer(b.grace)
	defer t.Stop()
	select {
	case <-done:
		// The leader is gone; children it left in the group die too.
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	case <-t.C:
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-done
	}
}

// allPass reports whether every GPU of ids passes this report cleanly (a
// warning is not clean).
func (r *DiagReport) allPass(ids []int) bool {
	gpus := make([]GPU, len(ids))
	for i, id := range ids {
		gpus[i] = GPU{UUID: strconv.Itoa(id), Index: id}
	}
	for _, cr := range r.Evaluate(0, gpus, ids, DiagOptions{}) {
		if !cr.Passed {
			return false
		}
	}
	return true
}

func stderrTail(b *boundedBuffer) string {
	s := strings.TrimSpace(string(b.buf))
	if s == "" {
		return ""
	}
	return ": stderr: " + truncateUTF8(s, maxMessageBytes)
}

// boundedBuffer keeps the first max bytes written to it and notes that
// more came; it never fails a write, so the command is not stopped by a
// broken pipe.
type boundedBuffer struct {
	buf      []byte
	max      int
	overflow bool
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if room := b.max - len(b.buf); n > room {
		b.overflow = true
		p = p[:max(room, 0)]
	}
	b.buf = append(b.buf, p...)
	return n, nil
}
