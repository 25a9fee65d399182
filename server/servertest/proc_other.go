//go:build !(linux || darwin || freebsd)

package servertest

import (
	"fmt"
	"os"
	"syscall"
)

// sigStop is a value no signal here has: pausing a node is not supported.
const sigStop = syscall.Signal(-1)

// ownProcessGroup: the nodes stay in the test's group here.
func ownProcessGroup() *syscall.SysProcAttr { return nil }

// sendSignal can only kill here (os.Process.Signal sends nothing else).
func sendSignal(pid int, sig syscall.Signal) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	if sig != syscall.SIGKILL {
		return fmt.Errorf("signal %v: not supported on this system", sig)
	}
	return p.Kill()
}
