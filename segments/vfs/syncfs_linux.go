package vfs

import (
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// OpenFSSync implements FSSyncer: the handle is dir opened, its Sync
// syncfs(2) on it. The kernel samples the filesystem's write-error
// sequence when the directory is opened, so Sync reports an error met
// since then, once.
func (osFS) OpenFSSync(dir string) (FSSync, error) {
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
