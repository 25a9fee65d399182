//go:build !linux

package vfs

import "os"

// openFile opens name with flag as a File (openfile_linux.go says why Linux
// differs).
func openFile(name string, flag int) (File, error) {
	f, err := os.OpenFile(name, flag, 0o600)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

// osFile is an *os.File; it keeps SyscallConn visible so Chunk.WriteTo can
// use sendfile.
type osFile struct{ *os.File }

func (f osFile) Size() (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}
