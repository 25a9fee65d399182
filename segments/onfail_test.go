package segments

import (
	"errors"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/runnel/runnel/segments/vfs"
)

// TestOnFailTellsEachFailure: Options.OnFail is called once each time the
// log's sticky error is set, also when the failing operation is the
// background flush of a segment a roll sealed, which no caller of the log
// sees fail (a broker learns of failed logs from it instead of asking
// every log for Err each round, issue 19), and again after a recovery.
func TestOnFailTellsEachFailure(t *testing.T) {
	mem := vfs.NewMemFS()
	efs := vfs.NewErrorFS(mem, nil)
	cfg := DefaultConfig()
	cfg.SegmentBytes = 1024
	var calls atomic.Int32
	failed := make(chan struct{}, 4)
	l := mustOpen(t, "/d/onfail", cfg, Options{FS: efs, OnFail: func() {
		calls.Add(1)
		failed <- struct{}{}
	}})
	defer l.Close()
	mustAppend(t, l, valueBatch(2, 100, 1), 0)
	// Only the sealed segment's fsync fails: the appends themselves do
	// not fsync (flush.messages unset), so the roll's append succeeds and
	// the failure happens on the seal loop's goroutine.
	efs.SetInjector(func(op vfs.Op, path string) error {
		if op == vfs.OpSync && strings.HasSuffix(path, logSuffix) {
			return syscall.EIO
		}
		return nil
	})
	for l.Err() == nil && len(l.segs) < 3 {
		if _, err := l.Append(valueBatch(2, 400, 1), 0); err != nil {
			break
		}
	}
	select {
	case <-failed:
	case <-time.After(time.Minute):
		t.Fatal("the seal flush's failure was not told")
	}
	if !errors.Is(l.Err(), syscall.EIO) {
		t.Fatalf("Err after the told failure: %v", l.Err())
	}
	for range 3 { // refused: the error is sticky, not set again
		if _, err := l.Append(valueBatch(1, 10, 1), 0); !errors.Is(err, syscall.EIO) {
			t.Fatalf("append after the failure: %v", err)
		}
	}
	if err := l.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("sync after the failure: %v", err)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("OnFail called %d times for one failure", n)
	}
	efs.SetInjector(nil)
	if err := l.Recover(); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, valueBatch(1, 10, 1), 0)
	efs.SetInjector(vfs.FailAfter(vfs.OpSync, 0, syscall.EIO))
	if err := l.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("sync with a failing disk: %v", err)
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("OnFail called %d times after a second failure, want 2", n)
	}
}
