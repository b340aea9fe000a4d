//go:build !linux

package childproc

import "syscall"

// sysProcAttr: a process group of its own; only Linux has a parent-death
// signal, so dieWithParent does nothing here.
func sysProcAttr(bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
