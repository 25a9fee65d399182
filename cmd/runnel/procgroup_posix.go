//go:build linux || darwin || freebsd

package main

import "syscall"

// ownProcessGroup starts a dev node in a process group of its own.
func ownProcessGroup() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
