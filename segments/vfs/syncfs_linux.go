package vfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// OpenFSSync implements FSSyncer: the handle is dir opened, its Sync
// syncfs(2) on it. The kernel samples the filesystem's write-error
// sequence when the directory is opened, so Sync reports an error met
// since then, once. Before Linux 5.8 syncfs reported no write error at
// all: there it answers errors.ErrUnsupported, and callers fsync each
// file as without an FSSyncer.
func (osFS) OpenFSSync(dir string) (FSSync, error) {
	if !syncfsReportsErrors() {
		return nil, fmt.Errorf("syncfs before Linux 5.8 reports no write error: %w", errors.ErrUnsupported)
	}
	f, err := os.Open(filepath.Clean(dir))
	if err != nil {
		return nil, err
	}
	return osFSSync{f}, nil
}

type osFSSync struct{ f *os.File }

func (h osFSSync) Close() error { return h.f.Close() }

func (h osFSSync) Sync() error {
	if err := unix.Syncfs(int(h.f.Fd())); err != nil {
		return &os.PathError{Op: "syncfs", Path: h.f.Name(), Err: err}
	}
	return nil
}

// syncfsReportsErrors: the running kernel is Linux 5.8 or newer (unknown
// releases count as older).
func syncfsReportsErrors() bool {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return false
	}
	major, minor, ok := kernelRelease(unix.ByteSliceToString(u.Release[:]))
	return ok && (major > 5 || major == 5 && minor >= 8)
}

// kernelRelease reads "major.minor" from the front of a release string
// such as "6.1.0-18-amd64".
func kernelRelease(rel string) (major, minor int, ok bool) {
	a, rest, found := strings.Cut(rel, ".")
	if !found {
		return 0, 0, false
	}
	b := rest
	if i := strings.IndexFunc(rest, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		b = rest[:i]
	}
	major, err1 := strconv.Atoi(a)
	minor, err2 := strconv.Atoi(b)
	return major, minor, err1 == nil && err2 == nil
}
