//go:build linux

package segments

import (
	"errors"
	"fmt"
	"io"
	"syscall"
)

// sendfile copies n bytes at off of src to the socket dst inside the kernel.
// It never touches the file's seek position. handled is false when it could
// not start (then nothing was written and the caller copies instead).
func sendfile(dst, src syscall.Conn, off, n int64) (written int64, handled bool, err error) {
	srcRaw, err := src.SyscallConn()
	if err != nil {
		return 0, false, nil
	}
	dstRaw, err := dst.SyscallConn()
	if err != nil {
		return 0, false, nil
	}
	var opErr error
	cerr := srcRaw.Control(func(infd uintptr) {
		werr := dstRaw.Write(func(outfd uintptr) bool {
			for written < n {
				o := off + written
				m, err := syscall.Sendfile(int(outfd), int(infd), &o, int(min(n-written, 1<<30)))
				if m > 0 {
					written += int64(m)
				}
				switch {
				case err == syscall.EAGAIN:
					return false // wait until the socket is writable
				case err == syscall.EINTR:
					continue
				case err != nil:
					opErr = err
					return true
				case m == 0:
					opErr = io.ErrUnexpectedEOF // the file was cut under us
					return true
				}
			}
			return true
		})
		if opErr == nil {
			opErr = werr
		}
	})
	if opErr == nil {
		opErr = cerr
	}
	if written == 0 && (errors.Is(opErr, syscall.EINVAL) || errors.Is(opErr, syscall.ENOSYS) || errors.Is(opErr, syscall.EOPNOTSUPP)) {
		return 0, false, nil // this file or socket cannot sendfile: copy
	}
	if opErr != nil {
		return written, true, fmt.Errorf("segments: sendfile: %w", opErr)
	}
	return written, true, nil
}
