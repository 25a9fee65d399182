//go:build linux || darwin || freebsd

package server

import (
	"os"
	"syscall"
)

// lockFile takes an exclusive lock on f without waiting (flock: released
// by the kernel when the process ends, however it ends).
func lockFile(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
}
