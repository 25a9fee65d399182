package vfs

import (
	"errors"
	"io"
	"io/fs"
	"strings"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// openFile opens name with flag (O_CLOEXEC added) as an fdFile: its raw
// descriptor, outside Go's poller and without an *os.File. The segment
// cache reopens a file for every append or read of a log whose file it
// closed to make room (issue 19: 300,000 partitions behind 20,000
// descriptors, so each append of a burst writing to every partition opens
// one file and closes another), and os.File cost there what the system
// calls did not need: os.OpenFile adds every file to the poller (four
// fcntl calls and an epoll_ctl that fails for a regular file); os.NewFile
// one fcntl, two allocations and a finalizer (a cleanup to register, then
// to cancel at Close); and syscall.Open a NUL-terminated copy of the path.
// Here the path is copied to the stack when it fits pathBuf.
func openFile(name string, flag int) (File, error) {
	var buf pathBuf
	p, err := buf.cString(name)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	dirfd := unix.AT_FDCWD
	for {
		r, _, e := syscall.Syscall6(unix.SYS_OPENAT, uintptr(dirfd), uintptr(unsafe.Pointer(p)),
			uintptr(flag|unix.O_CLOEXEC|unix.O_LARGEFILE), 0o600, 0, 0)
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			return nil, &fs.PathError{Op: "open", Path: name, Err: e}
		}
		return &fdFile{fd: int(r), name: name}, nil
	}
}

// pathBuf holds a path NUL-terminated for a system call: segment paths
// are a data directory, a partition's directory and a 24-byte name.
type pathBuf [256]byte

// cString returns name NUL-terminated, in b when it fits (else in a new
// slice); EINVAL when name holds a NUL, as syscall.BytePtrFromString.
func (b *pathBuf) cString(name string) (*byte, error) {
	if strings.IndexByte(name, 0) >= 0 {
		return nil, syscall.EINVAL
	}
	if len(name) >= len(b) {
		return syscall.BytePtrFromString(name)
	}
	copy(b[:], name)
	b[len(name)] = 0
	return &b[0], nil
}

// fdFile is an open file as its descriptor. Every method may run
// concurrently with the others: a call holds the descriptor (users counts
// it) and Close closes it once no call holds it, so a descriptor number is
// never used after the kernel may have given it to another open (as
// os.File's internal/poll does). Unlike an *os.File, an fdFile that is
// dropped unclosed keeps its descriptor: the segment cache, which opens
// them, closes each one it takes out (FileCache), and the other callers
// (checkpoints, compaction) close theirs before they return.
type fdFile struct {
	fd    int
	name  string
	users atomic.Int64 // calls holding fd, plus fdClosed once Close was called
}

const fdClosed = 1 << 62

// hold counts a call using fd; false once the file is closed.
func (f *fdFile) hold() bool {
	for {
		u := f.users.Load()
		if u&fdClosed != 0 {
			return false
		}
		if f.users.CompareAndSwap(u, u+1) {
			return true
		}
	}
}

// drop ends a call; the last one after Close closes fd.
func (f *fdFile) drop() {
	if f.users.Add(-1) == fdClosed {
		_ = syscall.Close(f.fd)
	}
}

func (f *fdFile) closedErr(op string) error {
	return &fs.PathError{Op: op, Path: f.name, Err: fs.ErrClosed}
}

// maxRW is the most one read or write asks for, as os.File's (Linux moves
// at most 0x7ffff000 bytes a call).
const maxRW = 1 << 30

// ReadAt reads len(p) bytes at off, as os.File.ReadAt: short only with an
// error, io.EOF at the end of the file.
func (f *fdFile) ReadAt(p []byte, off int64) (n int, err error) {
	if off < 0 {
		return 0, &fs.PathError{Op: "readat", Path: f.name, Err: errors.New("negative offset")}
	}
	if !f.hold() {
		return 0, f.closedErr("read")
	}
	defer f.drop()
	for len(p) > 0 {
		m, err := syscall.Pread(f.fd, p[:min(len(p), maxRW)], off)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return n, &fs.PathError{Op: "read", Path: f.name, Err: err}
		}
		if m == 0 {
			return n, io.EOF
		}
		n += m
		p = p[m:]
		off += int64(m)
	}
	return n, nil
}

// WriteAt writes p at off, as os.File.WriteAt: all of it or an error.
func (f *fdFile) WriteAt(p []byte, off int64) (n int, err error) {
	if off < 0 {
		return 0, &fs.PathError{Op: "writeat", Path: f.name, Err: errors.New("negative offset")}
	}
	if !f.hold() {
		return 0, f.closedErr("write")
	}
	defer f.drop()
	for len(p) > 0 {
		m, err := syscall.Pwrite(f.fd, p[:min(len(p), maxRW)], off)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return n, &fs.PathError{Op: "write", Path: f.name, Err: err}
		}
		if m == 0 {
			return n, &fs.PathError{Op: "write", Path: f.name, Err: io.ErrUnexpectedEOF}
		}
		n += m
		p = p[m:]
		off += int64(m)
	}
	return n, nil
}

// Truncate sets the file's size (ftruncate).
func (f *fdFile) Truncate(size int64) error {
	if !f.hold() {
		return f.closedErr("truncate")
	}
	defer f.drop()
	for {
		err := syscall.Ftruncate(f.fd, size)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return &fs.PathError{Op: "truncate", Path: f.name, Err: err}
		}
		return nil
	}
}

// Sync is fsync(2), as os.File.Sync.
func (f *fdFile) Sync() error {
	if !f.hold() {
		return f.closedErr("sync")
	}
	defer f.drop()
	for {
		err := syscall.Fsync(f.fd)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return &fs.PathError{Op: "sync", Path: f.name, Err: err}
		}
		return nil
	}
}

// Size is the file's size (fstat).
func (f *fdFile) Size() (int64, error) {
	if !f.hold() {
		return 0, f.closedErr("stat")
	}
	defer f.drop()
	var st syscall.Stat_t
	for {
		err := syscall.Fstat(f.fd, &st)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return 0, &fs.PathError{Op: "stat", Path: f.name, Err: err}
		}
		return st.Size, nil
	}
}

// Close closes the descriptor, at once or when the last call using it
// ends; a second Close is fs.ErrClosed.
func (f *fdFile) Close() error {
	for {
		u := f.users.Load()
		if u&fdClosed != 0 {
			return f.closedErr("close")
		}
		if !f.users.CompareAndSwap(u, u|fdClosed) {
			continue
		}
		if u != 0 {
			return nil // the last call closes it
		}
		// Not retried on EINTR: Linux has released the descriptor then.
		if err := syscall.Close(f.fd); err != nil {
			return &fs.PathError{Op: "close", Path: f.name, Err: err}
		}
		return nil
	}
}

// SyscallConn gives the descriptor to sendfile (Chunk.WriteTo) as an
// *os.File's does: held for the length of a Control call.
func (f *fdFile) SyscallConn() (syscall.RawConn, error) { return fdConn{f}, nil }

type fdConn struct{ f *fdFile }

func (c fdConn) Control(fn func(fd uintptr)) error {
	if !c.f.hold() {
		return c.f.closedErr("control")
	}
	defer c.f.drop()
	fn(uintptr(c.f.fd))
	return nil
}

// errNotPollable is what Read and Write answer when fn asks to wait: a
// regular file is never waited for (as an *os.File's outside the poller).
var errNotPollable = errors.New("vfs: waiting for a file outside the poller")

func (c fdConn) Read(fn func(fd uintptr) bool) error  { return c.do(fn) }
func (c fdConn) Write(fn func(fd uintptr) bool) error { return c.do(fn) }

func (c fdConn) do(fn func(fd uintptr) bool) error {
	if !c.f.hold() {
		return c.f.closedErr("raw")
	}
	defer c.f.drop()
	if !fn(uintptr(c.f.fd)) {
		return errNotPollable
	}
	return nil
}
