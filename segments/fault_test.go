package segments

import (
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/runnel/runnel/segments/vfs"
)

// TestFsyncFailureIsSticky: with fsync before acknowledging, a failed fsync
// fails that append and every later one, and after a crash every
// acknowledged record is still there.
func TestFsyncFailureIsSticky(t *testing.T) {
	const dir = "/d/fsync"
	mem := vfs.NewMemFS()
	efs := vfs.NewErrorFS(mem, nil)
	cfg := DefaultConfig()
	cfg.FlushMessages = 1
	cfg.SegmentBytes = 4096
	l := mustOpen(t, dir, cfg, Options{FS: efs})
	var acked int64
	for i := 0; i < 20; i++ {
		info := mustAppend(t, l, valueBatch(2, 100, int64(i)), 0)
		acked = info.LastOffset + 1
	}
	efs.SetInjector(vfs.FailAfter(vfs.OpSync, 0, syscall.EIO))
	if _, err := l.Append(valueBatch(2, 100, 1), 0); !errors.Is(err, syscall.EIO) {
		t.Fatalf("append with failing fsync: %v", err)
	}
	efs.SetInjector(nil) // the disk "recovers", the log must not
	for i := 0; i < 3; i++ {
		if _, err := l.Append(valueBatch(1, 10, 1), 0); !errors.Is(err, syscall.EIO) {
			t.Fatalf("append %d after fsync failure: %v", i, err)
		}
	}
	if err := l.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("sync after failure: %v", err)
	}
	if err := l.Truncate(0); !errors.Is(err, syscall.EIO) {
		t.Fatalf("truncate after failure: %v", err)
	}
	l2 := mustOpen(t, dir, cfg, Options{FS: mem.Crash(nil)})
	defer l2.Close()
	if end := l2.EndOffset(); end < acked {
		t.Fatalf("after crash end %d, acknowledged %d", end, acked)
	}
	mustAppend(t, l2, valueBatch(1, 10, 1), 0)
}

// TestENOSPC: a full disk gives a clear error, the log is unchanged, the
// error is sticky, and no partial batch survives a reopen, even when cutting
// the partial write back fails too.
func TestENOSPC(t *testing.T) {
	for _, truncateFails := range []bool{false, true} {
		name := "cut back"
		if truncateFails {
			name = "cut back fails"
		}
		t.Run(name, func(t *testing.T) {
			const dir = "/d/enospc"
			mem := vfs.NewMemFS()
			efs := vfs.NewErrorFS(mem, nil)
			cfg := DefaultConfig()
			cfg.FlushMessages = 1
			l := mustOpen(t, dir, cfg, Options{FS: efs})
			for i := 0; i < 10; i++ {
				mustAppend(t, l, valueBatch(3, 100, int64(i)), 0)
			}
			end, size := l.EndOffset(), l.Size()
			efs.SetInjector(func(op vfs.Op, path string) error {
				switch {
				case op == vfs.OpWrite && strings.HasSuffix(path, logSuffix):
					return syscall.ENOSPC
				case op == vfs.OpTruncate && truncateFails:
					return syscall.EIO
				}
				return nil
			})
			_, err := l.Append(valueBatch(3, 100, 1), 0)
			if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "no space left") {
				t.Fatalf("append on a full disk: %v", err)
			}
			if l.EndOffset() != end {
				t.Fatalf("end moved to %d", l.EndOffset())
			}
			efs.SetInjector(nil)
			if _, err := l.Append(valueBatch(1, 10, 1), 0); !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("append after ENOSPC: %v", err)
			}
			l.Close()
			for _, fs := range []vfs.FS{mem, mem.Crash(rand.New(rand.NewPCG(1, 2)))} {
				l2 := mustOpen(t, dir, cfg, Options{FS: fs})
				if l2.EndOffset() != end || l2.Size() != size {
					t.Fatalf("reopen: end %d size %d, want %d %d", l2.EndOffset(), l2.Size(), end, size)
				}
				checkIndexes(t, l2)
				l2.Close()
			}
		})
	}
}

// TestFaultsEverywhere fails each kind of operation once at a random point
// of a workload and checks the log either reports the error or carries on,
// and that a reopen after a crash keeps every acknowledged record.
func TestFaultsEverywhere(t *testing.T) {
	ops := []vfs.Op{vfs.OpCreate, vfs.OpOpen, vfs.OpRemove, vfs.OpRename, vfs.OpSyncDir, vfs.OpRead, vfs.OpWrite, vfs.OpTruncate, vfs.OpSync}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, op := range ops {
		for trial := 0; trial < 12; trial++ {
			const dir = "/d/faults"
			mem := vfs.NewMemFS()
			efs := vfs.NewErrorFS(mem, nil)
			cfg := DefaultConfig()
			cfg.FlushMessages = 1
			cfg.SegmentBytes = 2048
			cfg.RetentionBytes = 6000
			l := mustOpen(t, dir, cfg, Options{FS: efs})
			efs.SetInjector(vfs.FailAfter(op, int64(rng.IntN(40)), nil))
			var acked int64 = -1
			failed := false
			for i := 0; i < 60; i++ {
				info, err := l.Append(valueBatch(2, 50, int64(i)), 0)
				if err != nil {
					failed = true
					continue
				}
				if failed {
					t.Fatalf("%v: append acknowledged after a failure", op)
				}
				acked = info.LastOffset
				if i%10 == 9 {
					if err := l.Maintain(l.now()); err != nil {
						failed = true
					}
				}
			}
			efs.SetInjector(nil)
			l2 := mustOpen(t, dir, cfg, Options{FS: mem.Crash(nil)})
			if l2.EndOffset() <= acked {
				t.Fatalf("%v: end %d after crash, acknowledged up to %d", op, l2.EndOffset(), acked)
			}
			checkIndexes(t, l2)
			l2.Close()
		}
	}
}

// TestConcurrentFsyncFailure: appenders share fsyncs (group commit); when
// one fails, no append that starts afterwards is acknowledged, and every
// acknowledged record survives a power cut.
func TestConcurrentFsyncFailure(t *testing.T) {
	const dir = "/d/group"
	mem := vfs.NewMemFS()
	efs := vfs.NewErrorFS(mem, nil)
	cfg := DefaultConfig()
	cfg.FlushMessages = 1
	cfg.SegmentBytes = 16 << 10
	l := mustOpen(t, dir, cfg, Options{FS: efs})
	efs.SetInjector(vfs.FailAfter(vfs.OpSync, 120, syscall.EIO))
	var mu sync.Mutex
	var acked []int64
	var failed atomic.Bool
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 80; i++ {
				startedAfterFailure := failed.Load()
				info, err := l.Append(valueBatch(2, 50, int64(i)), 0)
				if err != nil {
					if !errors.Is(err, syscall.EIO) {
						t.Errorf("append: %v", err)
					}
					failed.Store(true)
					continue
				}
				if startedAfterFailure {
					t.Errorf("append started after a failed fsync was acknowledged")
				}
				mu.Lock()
				acked = append(acked, info.LastOffset)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if !failed.Load() {
		t.Fatal("no fsync failed")
	}
	l2 := mustOpen(t, dir, cfg, Options{FS: mem.Crash(rand.New(rand.NewPCG(5, 6)))})
	defer l2.Close()
	for _, off := range acked {
		if off >= l2.EndOffset() {
			t.Fatalf("acknowledged offset %d lost (end %d)", off, l2.EndOffset())
		}
	}
	checkIndexes(t, l2)
}

// TestResetInterrupted: a crash in the middle of Reset (some old segments
// still on disk) reopens as the reset log, never below the new start.
func TestResetInterrupted(t *testing.T) {
	const dir = "/d/reset"
	mem := vfs.NewMemFS()
	efs := vfs.NewErrorFS(mem, nil)
	cfg := DefaultConfig()
	cfg.SegmentBytes = 1024
	cfg.FlushMessages = 1
	l := mustOpen(t, dir, cfg, Options{FS: efs})
	for i := 0; i < 30; i++ {
		mustAppend(t, l, valueBatch(2, 100, int64(i)), 0)
	}
	efs.SetInjector(vfs.FailAfter(vfs.OpRemove, 2, nil))
	if err := l.Reset(5000); err == nil {
		t.Fatal("reset with failing removals succeeded")
	}
	l2 := mustOpen(t, dir, cfg, Options{FS: mem.Crash(nil)})
	defer l2.Close()
	if l2.StartOffset() != 5000 || l2.EndOffset() != 5000 {
		t.Fatalf("after an interrupted reset [%d, %d), want [5000, 5000)", l2.StartOffset(), l2.EndOffset())
	}
	if info := mustAppend(t, l2, valueBatch(1, 10, 1), 0); info.BaseOffset != 5000 {
		t.Fatalf("append at %d", info.BaseOffset)
	}
}
