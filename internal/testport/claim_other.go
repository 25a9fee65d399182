//go:build !(linux || darwin || freebsd)

package testport

// claim claims nothing where flock(2) is missing: the listen check alone
// stands.
func claim(int) bool { return true }
