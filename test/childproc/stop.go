package childproc

import (
	"os"
	"syscall"
	"time"
)

// Stop sends SIGTERM and, if the child is still there after grace, SIGKILL
// to its process group; it returns once the child is gone, saying whether it
// had to be killed. Stopping a child that has exited does nothing.
func (p *Process) Stop(grace time.Duration) (killed bool) {
	return len(StopAll(grace, p)) > 0
}

// StopAll stops procs together: SIGTERM to each that still runs, then, once
// grace is over for all of them, SIGKILL to the process group of each still
// running. It returns once all are gone, with those it had to kill.
func StopAll(grace time.Duration, procs ...*Process) (killed []*Process) {
	for _, p := range procs {
		if running(p) {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	expired := false
	for _, p := range procs {
		if !expired {
			select {
			case <-p.done:
				continue
			case <-deadline.C:
				expired = true
			}
			for _, q := range procs {
				if q.Kill() == nil {
					killed = append(killed, q)
				}
			}
		}
		<-p.done
	}
	return killed
}

// Kill sends SIGKILL to the child's process group, its own children
// included. A child already gone is not signalled (its pid may be someone
// else's by now): Kill then returns os.ErrProcessDone.
func (p *Process) Kill() error {
	if !running(p) {
		return os.ErrProcessDone
	}
	return syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
}

func running(p *Process) bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}
