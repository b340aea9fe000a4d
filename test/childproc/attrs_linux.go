package childproc

import "syscall"

// sysProcAttr: a process group of its own and, with dieWithParent, the
// kernel kills the child if this process dies without stopping it (kill -9,
// a crash).
func sysProcAttr(dieWithParent bool) *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Setpgid: true}
	if dieWithParent {
		attr.Pdeathsig = syscall.SIGKILL
	}
	return attr
}
