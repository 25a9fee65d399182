//go:build linux || darwin || freebsd

package raftfsm

import "syscall"

// diskFree is the space an unprivileged writer may still use on the
// filesystem holding dir; ok false where it cannot be measured.
func diskFree(dir string) (free int64, ok bool, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, false, err
	}
	return int64(st.Bavail) * int64(st.Bsize), true, nil
}
