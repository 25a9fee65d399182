package vfs

import (
	"io/fs"
	"os"
	"syscall"
)

// openFile opens name with flag (O_CLOEXEC added) as a File outside Go's
// poller. os.OpenFile tries to add every file it opens to the poller,
// which costs four fcntl calls and an epoll_ctl that fails for a regular
// file; os.NewFile on a blocking descriptor costs one fcntl. The segment
// cache reopens a file for every append or read of a log whose file it
// closed to make room (issue 19: 100,000 partitions behind a few thousand
// descriptors), so those syscalls were a third of an open's time
// (BenchmarkAppendEachPartition).
func openFile(name string, flag int) (File, error) {
	for {
		fd, err := syscall.Open(name, flag|syscall.O_CLOEXEC, 0o600)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "open", Path: name, Err: err}
		}
		return osFile{os.NewFile(uintptr(fd), name)}, nil
	}
}
