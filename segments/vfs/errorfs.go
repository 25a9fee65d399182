package vfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"syscall"
)

// Op names a filesystem operation for fault injection.
type Op int

// The operations an ErrorFS can fail.
const (
	OpCreate Op = iota
	OpOpen
	OpRemove
	OpRename
	OpMkdir
	OpList
	OpStat
	OpSyncDir
	OpRead
	OpWrite
	OpTruncate
	OpSync
	OpSyncFS
)

var opNames = [...]string{"create", "open", "remove", "rename", "mkdir", "list", "stat", "syncdir", "read", "write", "truncate", "sync", "syncfs"}

func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return fmt.Sprintf("op(%d)", int(o))
}

// Injector decides the fault for one operation on path: nil lets it run.
// For OpWrite, an error matching syscall.ENOSPC or io.ErrShortWrite first
// writes half of the bytes, as a full disk does. It is called from many
// goroutines.
type Injector func(op Op, path string) error

// ErrInjected is the error FailAfter injects unless given another.
var ErrInjected = errors.New("segments: injected fault")

// ErrorFS wraps an FS and fails the operations its Injector picks. Safe for
// concurrent use; SetInjector may be called at any time.
type ErrorFS struct {
	fs  FS
	inj atomic.Pointer[Injector]
}

// NewErrorFS returns fs with faults from inj (nil: none yet).
func NewErrorFS(fs FS, inj Injector) *ErrorFS {
	e := &ErrorFS{fs: fs}
	e.SetInjector(inj)
	return e
}

// SetInjector replaces the injector; nil injects nothing.
func (e *ErrorFS) SetInjector(inj Injector) { e.inj.Store(&inj) }

func (e *ErrorFS) fault(op Op, path string) error {
	if p := e.inj.Load(); p != nil && *p != nil {
		if err := (*p)(op, path); err != nil {
			return &os.PathError{Op: op.String(), Path: path, Err: err}
		}
	}
	return nil
}

// FailAfter returns an injector that lets n operations of kind op succeed
// and fails every later one with err (ErrInjected when nil).
func FailAfter(op Op, n int64, err error) Injector {
	if err == nil {
		err = ErrInjected
	}
	var seen atomic.Int64
	return func(o Op, _ string) error {
		if o == op && seen.Add(1) > n {
			return err
		}
		return nil
	}
}

func (e *ErrorFS) Create(name string) (File, error) {
	if err := e.fault(OpCreate, name); err != nil {
		return nil, err
	}
	f, err := e.fs.Create(name)
	if err != nil {
		return nil, err
	}
	return &errorFile{File: f, e: e, path: name}, nil
}

func (e *ErrorFS) Open(name string) (File, error) {
	if err := e.fault(OpOpen, name); err != nil {
		return nil, err
	}
	f, err := e.fs.Open(name)
	if err != nil {
		return nil, err
	}
	return &errorFile{File: f, e: e, path: name}, nil
}

func (e *ErrorFS) Remove(name string) error {
	if err := e.fault(OpRemove, name); err != nil {
		return err
	}
	return e.fs.Remove(name)
}

func (e *ErrorFS) RemoveAll(dir string) error {
	if err := e.fault(OpRemove, dir); err != nil {
		return err
	}
	return e.fs.RemoveAll(dir)
}

func (e *ErrorFS) Rename(oldname, newname string) error {
	if err := e.fault(OpRename, oldname); err != nil {
		return err
	}
	return e.fs.Rename(oldname, newname)
}

func (e *ErrorFS) MkdirAll(dir string) error {
	if err := e.fault(OpMkdir, dir); err != nil {
		return err
	}
	return e.fs.MkdirAll(dir)
}

func (e *ErrorFS) List(dir string) ([]string, error) {
	if err := e.fault(OpList, dir); err != nil {
		return nil, err
	}
	return e.fs.List(dir)
}

func (e *ErrorFS) Stat(name string) (os.FileInfo, error) {
	if err := e.fault(OpStat, name); err != nil {
		return nil, err
	}
	return e.fs.Stat(name)
}

// OpenFSSync implements FSSyncer when the wrapped FS does (AsFSSyncer),
// else returns errors.ErrUnsupported; the handle's Sync is OpSyncFS.
func (e *ErrorFS) OpenFSSync(dir string) (FSSync, error) {
	s, ok := AsFSSyncer(e.fs)
	if !ok {
		return nil, errors.ErrUnsupported
	}
	h, err := s.OpenFSSync(dir)
	if err != nil {
		return nil, err
	}
	return errorFSSync{FSSync: h, e: e, dir: dir}, nil
}

type errorFSSync struct {
	FSSync
	e   *ErrorFS
	dir string
}

func (h errorFSSync) Sync() error {
	if err := h.e.fault(OpSyncFS, h.dir); err != nil {
		return err
	}
	return h.FSSync.Sync()
}

func (e *ErrorFS) SyncDir(dir string) error {
	if err := e.fault(OpSyncDir, dir); err != nil {
		return err
	}
	return e.fs.SyncDir(dir)
}

// errorFile injects faults into a file's operations.
type errorFile struct {
	File
	e    *ErrorFS
	path string
}

func (f *errorFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.e.fault(OpRead, f.path); err != nil {
		return 0, err
	}
	return f.File.ReadAt(p, off)
}

func (f *errorFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.e.fault(OpWrite, f.path); err != nil {
		if errors.Is(err, syscall.ENOSPC) || errors.Is(err, io.ErrShortWrite) {
			n, _ := f.File.WriteAt(p[:len(p)/2], off)
			return n, err
		}
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

func (f *errorFile) Truncate(size int64) error {
	if err := f.e.fault(OpTruncate, f.path); err != nil {
		return err
	}
	return f.File.Truncate(size)
}

func (f *errorFile) Sync() error {
	if err := f.e.fault(OpSync, f.path); err != nil {
		return err
	}
	return f.File.Sync()
}
