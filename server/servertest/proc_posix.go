//go:build linux || darwin || freebsd

package servertest

import "syscall"

// sigStop pauses a node (Signal waits until every thread has stopped).
const sigStop = syscall.SIGSTOP

// ownProcessGroup starts a node in a process group of its own, so a signal
// to the test's group (a terminal's Ctrl-C) does not reach it before the
// test stops it.
func ownProcessGroup() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

func sendSignal(pid int, sig syscall.Signal) error { return syscall.Kill(pid, sig) }
