package main

import "syscall"

// childAttrs: a process group of its own, and the kernel kills the child
// if the demo dies without stopping it (kill -9, a crash).
func childAttrs() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
