package broker

import "golang.org/x/sys/unix"

// osXattrs is the OS's extended attributes (logdir.go).
type osXattrs struct{}

func (osXattrs) Getxattr(path, attr string, dest []byte) (int, error) {
	return unix.Getxattr(path, attr, dest)
}

func (osXattrs) Setxattr(path, attr string, value []byte) error {
	return unix.Setxattr(path, attr, value, 0)
}
