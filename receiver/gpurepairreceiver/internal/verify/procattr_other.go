//go:build !linux

package verify

import "syscall"

// commandSysProcAttr: the command in a process group of its own; only
// Linux has a parent-death signal.
func commandSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
