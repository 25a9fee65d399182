package vfs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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

// An fdFile reads, writes and fails as an *os.File over the same file:
// ReadAt short only with io.EOF, errors as *PathError naming the file,
// fs.ErrClosed after Close (a second Close too), a path of any length,
// and a path holding a NUL refused with EINVAL.
func TestFdFileAsOSFile(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "00000000000000000000.log")
	f, err := openFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.(*fdFile); !ok {
		t.Fatalf("openFile gave %T, want *fdFile", f)
	}
	if n, err := f.WriteAt([]byte("hello"), 2); n != 5 || err != nil {
		t.Fatalf("WriteAt: %d, %v", n, err)
	}
	if size, err := f.Size(); size != 7 || err != nil {
		t.Fatalf("Size: %d, %v; want 7", size, err)
	}
	b := make([]byte, 4)
	if n, err := f.ReadAt(b, 1); n != 4 || err != nil || string(b) != "\x00hel" {
		t.Fatalf("ReadAt: %d, %q, %v", n, b[:n], err)
	}
	if n, err := f.ReadAt(b, 5); n != 2 || err != io.EOF || string(b[:n]) != "lo" {
		t.Fatalf("ReadAt across the end: %d, %q, %v; want 2, \"lo\", io.EOF", n, b[:n], err)
	}
	if n, err := f.ReadAt(b, 7); n != 0 || err != io.EOF {
		t.Fatalf("ReadAt at the end: %d, %v; want 0, io.EOF", n, err)
	}
	if _, err := f.ReadAt(b, -1); err == nil {
		t.Fatal("ReadAt at -1: no error")
	}
	if err := f.Truncate(3); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(name); err != nil || string(got) != "\x00\x00h" {
		t.Fatalf("file after Truncate: %q, %v", got, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	for op, err := range map[string]error{
		"read":     second(f.ReadAt(b, 0)),
		"write":    second(f.WriteAt(b, 0)),
		"truncate": f.Truncate(0),
		"sync":     f.Sync(),
		"stat":     second(f.Size()),
		"close":    f.Close(),
	} {
		var pe *fs.PathError
		if !errors.Is(err, fs.ErrClosed) || !errors.As(err, &pe) || pe.Path != name || pe.Op != op {
			t.Errorf("%s after Close: %v, want a *PathError %q of %s wrapping fs.ErrClosed", op, err, op, name)
		}
	}
	rc, err := f.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.Control(func(uintptr) { t.Error("Control ran after Close") }); !errors.Is(err, fs.ErrClosed) {
		t.Errorf("Control after Close: %v, want fs.ErrClosed", err)
	}

	long := filepath.Join(dir, strings.Repeat("d", 200), strings.Repeat("e", 100))
	if err := os.MkdirAll(filepath.Dir(long), 0o700); err != nil {
		t.Fatal(err)
	}
	if f, err := openFile(long, os.O_RDWR|os.O_CREATE); err != nil {
		t.Fatalf("open of a %d-byte path: %v", len(long), err)
	} else {
		f.Close()
	}
	if _, err := openFile(name+"\x00x", os.O_RDWR); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("open of a path holding a NUL: %v, want EINVAL", err)
	}
}

func second[T any](_ T, err error) error { return err }

// Close while another goroutine's call uses the descriptor closes it when
// that call ends, never under it: the number could be reused by the next
// open meanwhile.
func TestFdFileCloseWaitsForCalls(t *testing.T) {
	name := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(name, []byte("abc"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := openFile(name, os.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	fd := f.(*fdFile).fd
	rc, _ := f.(syscall.Conn).SyscallConn()
	err = rc.Control(func(uintptr) {
		if err := f.Close(); err != nil {
			t.Errorf("Close during Control: %v", err)
		}
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil {
			t.Errorf("descriptor closed under a Control call: %v", err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if target, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd)); err == nil && target == name {
		t.Errorf("descriptor %d still open on %s after the call ended", fd, name)
	}
}
