package vfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkOpenClose is one open and close of a segment file, as the
// segment cache does for a log whose file it closed to make room: os
// through os.OpenFile (the poller's fcntl and epoll_ctl calls), runnel
// through openFile.
func BenchmarkOpenClose(b *testing.B) {
	name := filepath.Join(b.TempDir(), "00000000000000000000.log")
	if err := os.WriteFile(name, []byte("x"), 0o600); err != nil {
		b.Fatal(err)
	}
	b.Run("os", func(b *testing.B) {
		for b.Loop() {
			f, err := os.OpenFile(name, os.O_RDWR, 0)
			if err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
	})
	b.Run("runnel", func(b *testing.B) {
		for b.Loop() {
			f, err := openFile(name, os.O_RDWR)
			if err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
	})
}

// openFile's files are what os.OpenFile's were: created 0600, truncated by
// Create, close-on-exec, a missing file fs.ErrNotExist as a *PathError, and
// usable for sendfile (SyscallConn).
func TestOSFSOpenFile(t *testing.T) {
	fsys := OSFS()
	name := filepath.Join(t.TempDir(), "00000000000000000000.log")
	if _, err := fsys.Open(name); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("open of a missing file: %v, want fs.ErrNotExist", err)
	} else if pe, ok := err.(*fs.PathError); !ok || pe.Path != name {
		t.Fatalf("open of a missing file: %#v, want a *PathError naming it", err)
	}
	f, err := fsys.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("abc"), 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if fi, err := os.Stat(name); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("created file: %v, %v; want mode 0600", fi.Mode(), err)
	}
	f, err = fsys.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	raw, ok := f.(syscall.Conn)
	if !ok {
		t.Fatalf("%T has no SyscallConn: sendfile could not use it", f)
	}
	rc, err := raw.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var flags int
	var ferr error
	if err := rc.Control(func(fd uintptr) { flags, ferr = unix.FcntlInt(fd, unix.F_GETFD, 0) }); err != nil || ferr != nil {
		t.Fatal(err, ferr)
	}
	if flags&unix.FD_CLOEXEC == 0 {
		t.Error("descriptor not close-on-exec: child processes would inherit segment files")
	}
	if size, err := f.Size(); err != nil || size != 3 {
		t.Errorf("size %d, %v; want 3", size, err)
	}
	g, err := fsys.Create(name) // truncates
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if size, err := g.Size(); err != nil || size != 0 {
		t.Errorf("size after Create %d, %v; want 0", size, err)
	}
}
