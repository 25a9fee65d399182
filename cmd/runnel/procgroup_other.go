//go:build !(linux || darwin || freebsd)

package main

import "syscall"

// ownProcessGroup: the dev nodes stay in runnel dev's group here (a
// Ctrl-C reaches them too, and they stop on their own).
func ownProcessGroup() *syscall.SysProcAttr { return nil }
