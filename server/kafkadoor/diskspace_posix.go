//go:build linux || darwin || freebsd

package kafkadoor

import "syscall"

// diskSpace is the size of the filesystem holding dir and what an
// unprivileged writer may still use of it (DescribeLogDirs); ok false
// when it cannot be measured.
func diskSpace(dir string) (total, free int64, ok bool) {
	var st syscall.Statfs_t
	if syscall.Statfs(dir, &st) != nil {
		return 0, 0, false
	}
	return int64(st.Blocks) * int64(st.Bsize), int64(st.Bavail) * int64(st.Bsize), true
}
