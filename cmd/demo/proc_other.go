//go:build !linux

package main

import "syscall"

// childAttrs: a process group of its own.
func childAttrs() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
