// Package vfs is the filesystem the log in package segments reaches the disk
// through (shaped after pebble's vfs): the FS and File interfaces, the
// operating system's implementation (OSFS, files 0600 and directories 0700;
// on Linux a file is its raw descriptor, outside Go's poller and without
// an *os.File: openfile_linux.go),
// and two for tests and fault injection: MemFS, in memory, whose Crash keeps
// only what was synced (and a random part of the rest), and ErrorFS, which
// fails chosen operations (an fsync, a torn write, ENOSPC) through an
// Injector. An FS may also sync a whole filesystem at once (FSSyncer,
// optional: the OS's on Linux, MemFS, an ErrorFS over one). It imports no
// runnel package and starts no goroutine; every FS
// here is safe for concurrent use. It is apart from segments so that the
// log's format and logic read without the test filesystems beside them,
// and the broker and the server's test faults reach it without the log.
package vfs

import (
	"io"
	"os"
	"path/filepath"
	"sort"
)

// FS is the small filesystem interface package segments reaches the disk
// through, shaped after pebble's vfs. Implementations must be safe for concurrent use
// by many goroutines. Paths are slash- or OS-separated absolute or relative
// paths as the caller gives them.
type FS interface {
	// Create creates name, truncating it if it exists, for reading and writing.
	Create(name string) (File, error)
	// Open opens an existing file for reading and writing.
	Open(name string) (File, error)
	// Remove removes a file.
	Remove(name string) error
	// RemoveAll removes dir and everything below it.
	RemoveAll(dir string) error
	// Rename atomically replaces newname with oldname.
	Rename(oldname, newname string) error
	// MkdirAll creates dir and its parents.
	MkdirAll(dir string) error
	// List returns the names (not paths) of the entries of dir, sorted.
	List(dir string) ([]string, error)
	// Stat describes a file.
	Stat(name string) (os.FileInfo, error)
	// SyncDir makes the creations, renames and removals in dir durable.
	SyncDir(dir string) error
}

// FSSyncer is an FS that can make durable at once everything written to
// the filesystem holding a directory: file bytes, creations, renames and
// removals in every directory (Linux's syncfs(2)). One sync replaces the
// fsyncs of many files, each of which commits the filesystem's journal on
// its own. It is optional: see AsFSSyncer.
type FSSyncer interface {
	// OpenFSSync opens a handle on the filesystem holding dir. Its Sync
	// reports a write error of any file there met since the handle was
	// opened, as fsync does for its own file (on Linux since 5.8): open
	// it before the writes it is to vouch for.
	OpenFSSync(dir string) (FSSync, error)
}

// FSSync is a handle from FSSyncer.OpenFSSync; safe for concurrent use.
type FSSync interface {
	Sync() error
	Close() error
}

// AsFSSyncer returns fsys as an FSSyncer when it is one: the OS's on
// Linux, MemFS, and an ErrorFS wrapping one.
func AsFSSyncer(fsys FS) (FSSyncer, bool) {
	if e, ok := fsys.(*ErrorFS); ok {
		if _, ok := AsFSSyncer(e.fs); !ok {
			return nil, false
		}
		return e, true
	}
	s, ok := fsys.(FSSyncer)
	return s, ok
}

// File is an open file. ReadAt and WriteAt take explicit offsets, so one
// File may be shared by concurrent readers and one writer; Truncate, Sync
// and Close are safe to call concurrently with them.
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
	Truncate(size int64) error
	Sync() error
	Size() (int64, error)
}

// OSFS returns the operating system's filesystem.
func OSFS() FS { return osFS{} }

type osFS struct{}

// Files are 0600 and directories 0700: a log holds other people's records,
// readable by the broker's user only.
func (osFS) Create(name string) (File, error) {
	return openFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC)
}

func (osFS) Open(name string) (File, error) { return openFile(name, os.O_RDWR) }

func (osFS) Remove(name string) error             { return os.Remove(name) }
func (osFS) RemoveAll(dir string) error           { return os.RemoveAll(dir) }
func (osFS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }
func (osFS) MkdirAll(dir string) error            { return os.MkdirAll(dir, 0o700) }
func (osFS) Mkdir(dir string) error               { return os.Mkdir(dir, 0o700) }
func (osFS) Stat(name string) (os.FileInfo, error) {
	return os.Stat(name)
}

func (osFS) List(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	sort.Strings(names)
	return names, err
}

func (osFS) SyncDir(dir string) error {
	f, err := os.Open(filepath.Clean(dir))
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
