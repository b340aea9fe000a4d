package verify

import "syscall"

// commandSysProcAttr: the command in a process group of its own (so a
// cancel reaches its children too), killed by the kernel if the collector
// dies first.
func commandSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
