//go:build !linux

package broker

import "errors"

// osXattrs is the OS's extended attributes (logdir.go): none used here,
// so partition directories record their topic id in a file.
type osXattrs struct{}

func (osXattrs) Getxattr(string, string, []byte) (int, error) { return 0, errors.ErrUnsupported }

func (osXattrs) Setxattr(string, string, []byte) error { return errors.ErrUnsupported }
