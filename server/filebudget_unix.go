//go:build unix

package server

import "syscall"

// descriptorLimit returns the process's RLIMIT_NOFILE soft limit (Go's
// runtime raised it to the hard limit at start), 0 when it cannot be read.
func descriptorLimit() uint64 {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0
	}
	return uint64(lim.Cur)
}
