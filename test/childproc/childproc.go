// Package childproc runs the child programs of the test harnesses (collector
// binaries, the kfake broker, Prometheus, Python): each in a process group of
// its own, its output in a log file, stopped with SIGTERM and, after a grace
// period, SIGKILL to the whole group.
package childproc // import "github.com/otelcol-gpu/otelcol-gpu/test/childproc"

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

// Options say how Start runs a child.
type Options struct {
	// Name names the child in errors and its log, LogDir/Name.log.
	Name   string
	LogDir string
	// Env is added to this process's environment; a later entry wins.
	Env []string
	// Stdout, when set, takes the child's stdout instead of the log (stderr
	// still goes to the log). Read it only once the child is done.
	Stdout io.Writer
	// Stdin opens a pipe to the child's stdin (Process.Stdin); closing it
	// is the child's end of input.
	Stdin bool
	// DieWithParent asks the kernel to kill the child when this process
	// dies without stopping it (Linux only; a no-op elsewhere).
	DieWithParent bool
}

// Process is a running (or finished) child.
type Process struct {
	name  string
	log   string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{}
	err   error // cmd.Wait's; set before done closes
}

// Start runs bin with args as opts say. The log file is created (or
// truncated) first; an error starting the program names the child.
func Start(opts Options, bin string, args ...string) (*Process, error) {
	logPath := filepath.Join(opts.LogDir, opts.Name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), opts.Env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if opts.Stdout != nil {
		cmd.Stdout = opts.Stdout
	}
	p := &Process{name: opts.Name, log: logPath, cmd: cmd, done: make(chan struct{})}
	if opts.Stdin {
		if p.stdin, err = cmd.StdinPipe(); err != nil {
			logFile.Close()
			return nil, err
		}
	}
	// Own process group: a Ctrl-C in the terminal reaches the harness only,
	// which stops its children itself, and a kill reaches the child's own
	// children too.
	cmd.SysProcAttr = sysProcAttr(opts.DieWithParent)
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", opts.Name, err)
	}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// Name is the child's name, as in Options.
func (p *Process) Name() string { return p.name }

// LogPath is the child's log file.
func (p *Process) LogPath() string { return p.log }

// Pid is the child's process id (and its process group's).
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Args is the command line, the program as given to Start first.
func (p *Process) Args() []string { return p.cmd.Args }

// Stdin is the pipe to the child's stdin; nil without Options.Stdin.
func (p *Process) Stdin() io.WriteCloser { return p.stdin }

// Done is closed once the child has exited and its output is written.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is how the child ended (nil: exit status 0), once Done is closed.
func (p *Process) Err() error {
	<-p.done
	return p.err
}

// Exited says, without waiting, whether the child has ended, and how.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// Wait waits for the child to end or ctx to, whichever is first: exited is
// false when ctx ended first.
func (p *Process) Wait(ctx context.Context) (exited bool, err error) {
	select {
	case <-p.done:
		return true, p.err
	case <-ctx.Done():
		return false, nil
	}
}

// ExitCode is the child's exit status, or -1 while it runs or when a
// signal ended it.
func (p *Process) ExitCode() int {
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	default:
		return -1
	}
}

// Signal sends sig to the child (not its group).
func (p *Process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }
