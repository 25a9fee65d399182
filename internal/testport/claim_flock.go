//go:build linux || darwin || freebsd

package testport

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// claims keeps the claimed ports' lock files open: closing one would drop
// its lock.
var claims []*os.File

// claim takes port for this process unless another live test process holds
// it. A directory or lock that cannot be made is no claim at all, and the
// port is still handed out on the listen check alone.
func claim(port int) bool {
	dir := filepath.Join(os.TempDir(), "runnel-testport")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return true
	}
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return true
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return err != syscall.EWOULDBLOCK
	}
	claims = append(claims, f)
	return true
}
