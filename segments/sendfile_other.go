//go:build !linux

package segments

import "syscall"

func sendfile(dst, src syscall.Conn, off, n int64) (int64, bool, error) { return 0, false, nil }
