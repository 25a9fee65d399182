package segments

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/runnel/runnel/segments/vfs"
)

// TestRecoverAfterENOSPC: a full disk fails appends with ErrStorage; Recover
// keeps failing while the disk is full, and once space is back it reopens
// the log in place (cutting a torn tail the failed write left when cutting
// back failed too), appends resume at the acknowledged end, and every
// acknowledged record is read back.
func TestRecoverAfterENOSPC(t *testing.T) {
	for _, truncateFails := range []bool{false, true} {
		t.Run(map[bool]string{false: "cut back", true: "cut back fails"}[truncateFails], func(t *testing.T) {
			const dir = "/d/recover"
			mem := vfs.NewMemFS()
			efs := vfs.NewErrorFS(mem, nil)
			cfg := DefaultConfig()
			cfg.SegmentBytes = 4096
			l := mustOpen(t, dir, cfg, Options{FS: efs})
			defer l.Close()
			for i := 0; i < 20; i++ {
				mustAppend(t, l, valueBatch(2, 100, int64(i)), 0)
			}
			acked := l.EndOffset()
			efs.SetInjector(func(op vfs.Op, path string) error {
				switch {
				case op == vfs.OpWrite || op == vfs.OpCreate:
					return syscall.ENOSPC
				case op == vfs.OpTruncate && truncateFails:
					return syscall.EIO
				}
				return nil
			})
			_, err := l.Append(valueBatch(2, 100, 1), 0)
			if !errors.Is(err, ErrStorage) || !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("append on a full disk: %v", err)
			}
			if err := errHoldingLock(l); !errors.Is(err, ErrStorage) {
				t.Fatalf("Err after the failure: %v", err)
			}
			if err := l.Recover(); !errors.Is(err, ErrStorage) || !strings.Contains(err.Error(), "probe") {
				t.Fatalf("recover on a full disk: %v", err)
			}
			if _, err := l.Append(valueBatch(1, 10, 1), 0); !errors.Is(err, ErrStorage) {
				t.Fatalf("append after a failed recover: %v", err)
			}
			efs.SetInjector(nil) // space is back
			if err := l.Recover(); err != nil {
				t.Fatalf("recover: %v", err)
			}
			if err := errHoldingLock(l); err != nil || l.EndOffset() != acked {
				t.Fatalf("after recover: err %v end %d, want nil %d", err, l.EndOffset(), acked)
			}
			if err := l.Recover(); err != nil {
				t.Fatalf("recover of a healthy log: %v", err)
			}
			for i := 0; i < 20; i++ {
				info := mustAppend(t, l, valueBatch(2, 100, int64(100+i)), 0)
				if i == 0 && info.BaseOffset != acked {
					t.Fatalf("first append after recover at %d, want %d", info.BaseOffset, acked)
				}
			}
			checkIndexes(t, l)
			var records int
			for off := int64(0); off < l.EndOffset(); {
				for _, b := range decodeBatches(t, readAll(t, l, off, 1<<30)) {
					records += int(b.NumRecords)
					off = b.FirstOffset + int64(b.LastOffsetDelta) + 1
				}
			}
			if records != 80 {
				t.Fatalf("read %d records, want 80", records)
			}
		})
	}
}

// TestRecoverAfterFsyncFailure: after a failed fsync Recover writes the
// unsynced tail again and fsyncs it, so a power cut right after the recovery
// keeps everything the log holds.
func TestRecoverAfterFsyncFailure(t *testing.T) {
	const dir = "/d/resync"
	mem := vfs.NewMemFS()
	efs := vfs.NewErrorFS(mem, nil)
	cfg := DefaultConfig()
	cfg.FlushMessages = 1
	cfg.SegmentBytes = 4096
	l := mustOpen(t, dir, cfg, Options{FS: efs})
	defer l.Close()
	for i := 0; i < 10; i++ {
		mustAppend(t, l, valueBatch(2, 100, int64(i)), 0)
	}
	efs.SetInjector(vfs.FailAfter(vfs.OpSync, 0, syscall.EIO))
	if _, err := l.Append(valueBatch(2, 100, 1), 0); !errors.Is(err, ErrStorage) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("append with a failing fsync: %v", err)
	}
	efs.SetInjector(nil)
	if err := l.Recover(); err != nil {
		t.Fatalf("recover: %v", err)
	}
	end := l.EndOffset()
	mustAppend(t, l, valueBatch(2, 100, 50), 0)
	l2 := mustOpen(t, dir, cfg, Options{FS: mem.Crash(nil)})
	defer l2.Close()
	if got := l2.EndOffset(); got != end+2 {
		t.Fatalf("after a power cut end %d, want %d", got, end+2)
	}
}

// TestRecoverClosed: Recover on a closed log says so.
func TestRecoverClosed(t *testing.T) {
	l := mustOpen(t, "/d/closed", DefaultConfig(), Options{FS: vfs.NewMemFS()})
	l.Close()
	if err := l.Recover(); !errors.Is(err, ErrClosed) {
		t.Fatalf("recover after close: %v", err)
	}
}

// TestRecoverConcurrent: appends and reads run while the disk fills up and
// frees again many times, each time followed by Recover; no acknowledged
// record is lost and the log reads back whole (run with -race).
func TestRecoverConcurrent(t *testing.T) {
	const dir = "/d/concurrent"
	mem := vfs.NewMemFS()
	efs := vfs.NewErrorFS(mem, nil)
	cfg := DefaultConfig()
	cfg.SegmentBytes = 8192
	l := mustOpen(t, dir, cfg, Options{FS: efs})
	defer l.Close()
	var acked sync.Map // base offset -> record count
	w := newWorkers()
	defer w.halt()
	for range 2 {
		w.loop(func(i int) error {
			if info, err := l.Append(valueBatch(2, 60, int64(i)), 0); err == nil {
				acked.Store(info.BaseOffset, 2)
			} else if !errors.Is(err, ErrStorage) {
				return fmt.Errorf("append: %w", err)
			}
			if c, err := l.Read(l.StartOffset(), 4096, -1); err == nil {
				c.Close()
			}
			return nil
		})
	}
	full := func(op vfs.Op, path string) error {
		if op == vfs.OpWrite || op == vfs.OpCreate {
			return syscall.ENOSPC
		}
		return nil
	}
	for round := 0; round < 30; round++ {
		efs.SetInjector(full)
		for i := 0; l.Err() == nil && i < 1e6; i++ {
			runtime.Gosched()
		}
		efs.SetInjector(nil)
		if err := l.Recover(); err != nil {
			t.Fatalf("round %d: recover: %v", round, err)
		}
	}
	if err := w.halt(); err != nil {
		t.Error(err)
	}
	got := map[int64]bool{}
	for off := l.StartOffset(); off < l.EndOffset(); {
		for _, b := range decodeBatches(t, readAll(t, l, off, 1<<30)) {
			got[b.FirstOffset] = true
			off = b.FirstOffset + int64(b.LastOffsetDelta) + 1
		}
	}
	n := 0
	acked.Range(func(k, _ any) bool {
		n++
		if !got[k.(int64)] {
			t.Errorf("acknowledged batch at %d is gone", k)
		}
		return true
	})
	if n == 0 {
		t.Fatal("nothing acknowledged")
	}
	t.Logf("%d batches acknowledged over 30 disk-full rounds", n)
}

// errHoldingLock is l.Err asked while l's lock is held by another: the
// broker's loops ask it of every log changed lately, and an append or a
// roll holding the lock must not hold them up.
func errHoldingLock(l *Log) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.Err()
}
