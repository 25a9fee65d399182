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
