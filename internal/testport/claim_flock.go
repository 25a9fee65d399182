//go:build linux || darwin || freebsd

package testport

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// claims keeps the newest claimed ports' lock files open: closing one drops
// its lock. A claim only has to outlast the window between a port's check
// and its node's listen (then the listen check covers it), so the oldest is
// let go past maxClaims: a test process handing out thousands of ports does
// not hold a descriptor for each.
var claims []*os.File

const maxClaims = 256

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
	if len(claims) == maxClaims {
		claims[0].Close()
		claims = claims[1:]
	}
	claims = append(claims, f)
	return true
}
