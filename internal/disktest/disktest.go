// Package disktest gives tests a real full disk: a small tmpfs mounted
// where a node keeps some of its files, and a ballast file that fills it
// to the last byte. A real ENOSPC (or a real SIGBUS from a write through
// a memory-mapped file) is what the fail-stop and full-disk tests need;
// permission bits would not give it to a test running as root.
package disktest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"testing"
)

// MountTmpfs mounts a tmpfs of size bytes at dir (created), unmounted at
// cleanup (after the nodes started later are gone: cleanups run last
// first); it skips the test when mounting is not permitted (not root, no
// CAP_SYS_ADMIN, not Linux).
func MountTmpfs(t testing.TB, dir string, size int) {
	t.Helper()
	mount(t, dir, fmt.Sprintf("size=%d,mode=0700", size))
}

// MountTmpfsInodes is MountTmpfs with at most inodes files and
// directories (the mount point among them): creating one more fails
// with ENOSPC while the disk still has room.
func MountTmpfsInodes(t testing.TB, dir string, size, inodes int) {
	t.Helper()
	mount(t, dir, fmt.Sprintf("size=%d,nr_inodes=%d,mode=0700", size, inodes))
}

func mount(t testing.TB, dir, opts string) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("disk-full test needs a Linux tmpfs")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", opts, "tmpfs", dir).CombinedOutput()
	if err != nil {
		t.Skipf("disk-full test skipped: cannot mount a tmpfs (needs root): %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Logf("umount %s: %v: %s", dir, err, out)
		}
	})
}

// FillDisk writes the file path until its filesystem is full, to the
// last byte.
func FillDisk(t testing.TB, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, size := range []int{64 << 10, 4 << 10, 1} {
		chunk := make([]byte, size)
		for {
			if _, err := f.Write(chunk); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("fill %s: %v", path, err)
				}
				break
			}
		}
	}
}
