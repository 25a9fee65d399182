package segments

import (
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/runnel/runnel/segments/vfs"
)

// heldSync holds the first fsync that its selector picks (a slow disk)
// until let is called; later ones run at once. Callers defer let, so a
// failing test does not leave a goroutine or a Close waiting on it.
type heldSync struct {
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

// holdFirstSync installs a heldSync as efs's injector.
func holdFirstSync(efs *vfs.ErrorFS, pick func(op vfs.Op, path string) bool) *heldSync {
	h := &heldSync{entered: make(chan struct{}, 1), release: make(chan struct{})}
	var first atomic.Bool
	efs.SetInjector(func(op vfs.Op, path string) error {
		if pick(op, path) && first.CompareAndSwap(false, true) {
			h.entered <- struct{}{}
			<-h.release
		}
		return nil
	})
	return h
}

// segmentSync picks the fsync of a segment file.
func segmentSync(op vfs.Op, path string) bool {
	return op == vfs.OpSync && strings.HasSuffix(path, ".log")
}

// waitHeld waits for the held fsync to start; what names it.
func (h *heldSync) waitHeld(t *testing.T, what string) {
	t.Helper()
	select {
	case <-h.entered:
	case <-time.After(20 * time.Second):
		t.Fatalf("no %s", what)
	}
}

// let releases the held fsync (once; later calls do nothing).
func (h *heldSync) let() { h.once.Do(func() { close(h.release) }) }

// goesOn runs fn while an fsync is held and fails t when fn fails or does
// not return. The deadline only keeps a failing run from hanging; it times
// nothing.
func goesOn(t *testing.T, what string, fn func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("%s waited for the held fsync", what)
	}
}

// readFrom0 reads the log from its first offset.
func readFrom0(l *Log) error {
	c, err := l.Read(0, 1<<20, -1)
	if err == nil {
		c.Close()
	}
	return err
}

// appendAndRead appends one small batch at ts, then reads the log.
func appendAndRead(l *Log, ts int64) error {
	if _, err := l.Append(valueBatch(1, 10, ts), 0); err != nil {
		return err
	}
	return readFrom0(l)
}

// openFaulty opens a log on an ErrorFS over mem with segments of
// segmentBytes (0: the default).
func openFaulty(t *testing.T, dir string, mem *vfs.MemFS, segmentBytes int64, opts Options) (*Log, *vfs.ErrorFS, Config) {
	t.Helper()
	efs := vfs.NewErrorFS(mem, nil)
	cfg := DefaultConfig()
	if segmentBytes > 0 {
		cfg.SegmentBytes = segmentBytes
	}
	opts.FS = efs
	return mustOpen(t, dir, cfg, opts), efs, cfg
}

// fillToRoll appends until the next append of valueBatch(4, 200, …) rolls
// the active segment; it returns the end offset.
func fillToRoll(t *testing.T, l *Log) int64 {
	t.Helper()
	n := int64(len(valueBatch(4, 200, 1)))
	for {
		l.mu.Lock()
		full := l.active().size+n > l.cfg.SegmentBytes
		l.mu.Unlock()
		if full {
			return l.EndOffset()
		}
		mustAppend(t, l, valueBatch(4, 200, 1), 0)
	}
}

// TestRollFsyncOutsideLock: while the fsync of a segment sealed by a roll
// is held (a slow disk), appends and reads of the same log go on; the
// recovery point stays below the sealed segment until its flush is done,
// and a power cut at that moment loses nothing below the recovery point.
func TestRollFsyncOutsideLock(t *testing.T) {
	const dir = "/d/rollflush"
	mem := vfs.NewMemFS()
	l, efs, cfg := openFaulty(t, dir, mem, 8192, Options{})
	end := fillToRoll(t, l)
	if err := l.Sync(); err != nil { // recovery point at end before the roll
		t.Fatal(err)
	}
	held := holdFirstSync(efs, segmentSync)
	defer held.let()

	rolled := make(chan error, 1)
	go func() {
		_, err := l.Append(valueBatch(4, 200, 2), 0) // rolls
		rolled <- err
	}()
	held.waitHeld(t, "fsync of the segment sealed by the roll")
	// With the fsync held, another append and a read must not wait for it.
	goesOn(t, "an append and a read during the roll's fsync", func() error { return appendAndRead(l, 3) })
	if rp := l.RecoveryPoint(); rp > end {
		t.Fatalf("recovery point %d moved past the sealed segment (end %d) before its fsync", rp, end)
	}
	// A power cut now: everything below the saved recovery point is there.
	crashed := mem.Crash(nil)
	l2 := mustOpen(t, dir, cfg, Options{FS: crashed})
	if got := l2.EndOffset(); got < end {
		t.Fatalf("after a power cut during the roll's fsync end %d, fsynced %d", got, end)
	}
	l2.Close()

	held.let()
	if err := <-rolled; err != nil {
		t.Fatalf("rolling append: %v", err)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if rp, e := l.RecoveryPoint(), l.EndOffset(); rp != e {
		t.Fatalf("after Sync recovery point %d, end %d", rp, e)
	}
	synced := l.EndOffset()
	l3 := mustOpen(t, dir, cfg, Options{FS: mem.Crash(nil)})
	defer l3.Close()
	if got := l3.EndOffset(); got < synced {
		t.Fatalf("after a power cut end %d, fsynced %d", got, synced)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestRollFsyncFailureIsSticky: a failed fsync of a segment sealed by a
// roll fails the log as a failed append fsync does, and the recovery point
// never passes the segment it could not flush.
func TestRollFsyncFailureIsSticky(t *testing.T) {
	l, efs, _ := openFaulty(t, "/d/rollfail", vfs.NewMemFS(), 8192, Options{})
	defer l.Close()
	end := fillToRoll(t, l) // nothing fsynced yet: the recovery point is 0
	efs.SetInjector(func(op vfs.Op, path string) error {
		if segmentSync(op, path) {
			return syscall.EIO
		}
		return nil
	})
	// The roll itself may or may not report the failure (its flush can run
	// after it returns); Sync waits for it and must.
	_, _ = l.Append(valueBatch(4, 200, 3), 0)
	if err := l.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("sync after the roll's fsync failed: %v", err)
	}
	efs.SetInjector(nil)
	if _, err := l.Append(valueBatch(1, 10, 4), 0); !errors.Is(err, ErrStorage) {
		t.Fatalf("append after the roll's fsync failed: %v", err)
	}
	if rp := l.RecoveryPoint(); rp >= end {
		t.Fatalf("recovery point %d passed the segment sealed at %d whose fsync failed", rp, end)
	}
}

// TestMaintainFlushOutsideLock: Maintain's flush.ms flush, alone or in
// the same pass as a segment.ms roll, fsyncs without the log's lock: with
// the fsync held (a slow disk), appends and reads of the same log go on.
func TestMaintainFlushOutsideLock(t *testing.T) {
	for _, tc := range []struct {
		name      string
		segmentMs int64
		segments  int
	}{
		{"flush.ms", 0, 1},
		{"segment.ms and flush.ms", 60_000, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			efs := vfs.NewErrorFS(vfs.NewMemFS(), nil)
			cfg := DefaultConfig()
			cfg.SegmentMs = tc.segmentMs
			cfg.FlushMs = 1_000
			clock := fakeClock()
			l := mustOpen(t, "/d/maintainflush", cfg, Options{FS: efs, Now: clock.now})
			for range 10 {
				mustAppend(t, l, valueBatch(4, 200, clock.now().UnixMilli()), 0)
			}
			clock.add(2 * time.Minute) // flush.ms (and segment.ms) due, nothing past retention
			held := holdFirstSync(efs, segmentSync)
			defer held.let()
			maintained := make(chan error, 1)
			go func() { maintained <- l.Maintain(clock.now()) }()
			held.waitHeld(t, "fsync in the Maintain pass")
			goesOn(t, "an append and a read during Maintain's flush", func() error {
				return appendAndRead(l, clock.now().UnixMilli())
			})
			held.let()
			if err := <-maintained; err != nil {
				t.Fatalf("maintain: %v", err)
			}
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			if n := l.Segments(); n != tc.segments {
				t.Fatalf("%d segments, want %d", n, tc.segments)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestMaintainRollThenRetention: a segment.ms roll and retention in the
// same Maintain pass (an idle partition whose records are as old as its
// segment) delete the sealed segment; the roll's flush must not then fail
// the log over the file retention removed.
func TestMaintainRollThenRetention(t *testing.T) {
	cfg := DefaultConfig()
	cfg.SegmentMs = 60_000
	cfg.RetentionMs = 60_000
	clock := fakeClock()
	l := mustOpen(t, "/d/rollretain", cfg, Options{FS: vfs.NewMemFS(), Now: clock.now})
	defer l.Close()
	for range 10 {
		mustAppend(t, l, valueBatch(4, 200, clock.now().UnixMilli()), 0)
	}
	clock.add(2 * time.Minute)
	if err := l.Maintain(clock.now()); err != nil {
		t.Fatalf("maintain: %v", err)
	}
	if err := l.Sync(); err != nil {
		t.Fatalf("sync after the roll and retention: %v", err)
	}
	if _, err := l.Append(valueBatch(1, 10, clock.now().UnixMilli()), 0); err != nil {
		t.Fatalf("append after the roll and retention: %v", err)
	}
	if start, n := l.StartOffset(), l.Segments(); start != 40 || n != 1 {
		t.Fatalf("start %d with %d segments, want 40 and 1", start, n)
	}
}

// testClock is a wall clock tests move by hand (Options.Now).
type testClock struct{ ns atomic.Int64 }

func fakeClock() *testClock {
	c := &testClock{}
	c.ns.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *testClock) now() time.Time      { return time.Unix(0, c.ns.Load()) }
func (c *testClock) add(d time.Duration) { c.ns.Add(int64(d)) }

// TestFirstFlushOfCreatedLogOutsideLock: a log made by Create has no
// fsynced directory entry or state file; its first flush makes them
// durable, and that directory fsync (held here, a slow disk) does not hold
// the log's lock: reads of the log go on meanwhile.
func TestFirstFlushOfCreatedLogOutsideLock(t *testing.T) {
	const dir = "/d/createdflush"
	mem := vfs.NewMemFS()
	if err := mem.MkdirAll("/d"); err != nil {
		t.Fatal(err)
	}
	efs := vfs.NewErrorFS(mem, nil)
	cfg := DefaultConfig()
	l, err := Create(dir, cfg, Options{FS: efs, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, valueBatch(1, 10, 1), 0) // no fsync yet (no flush.messages)
	held := holdFirstSync(efs, func(op vfs.Op, path string) bool { return op == vfs.OpSyncDir && path == dir })
	defer held.let()
	synced := make(chan error, 1)
	go func() { synced <- l.Sync() }() // the log's first flush
	held.waitHeld(t, "directory fsync in the first flush of a created log")
	goesOn(t, "a read during the first flush's directory fsync", func() error { return readFrom0(l) })
	held.let()
	if err := <-synced; err != nil {
		t.Fatalf("sync: %v", err)
	}
	crashed := mem.Crash(nil) // fsynced: a power cut keeps it
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2 := mustOpen(t, dir, cfg, Options{FS: crashed})
	defer l2.Close()
	if got := l2.EndOffset(); got != 1 {
		t.Fatalf("after a power cut end %d, want 1", got)
	}
}

// TestMaintainFlushesNoRollUnderLock: Maintain flushes the rolls pending
// when it starts without the log's lock, and leaves a roll queued while it
// does so to the log's flusher: it used to flush that one holding the lock
// (lockQuiet's "rest under mu"), and with a slow disk and appends rolling
// every second or so, each maintenance pass held the partition's appends
// and reads for a whole flush (the slow-disk chaos scenario's 2.5 s gap).
func TestMaintainFlushesNoRollUnderLock(t *testing.T) {
	clock := fakeClock()
	l, efs, _ := openFaulty(t, "/d/maintainroll", vfs.NewMemFS(), 8192, Options{Now: clock.now})
	// No flusher goroutine: the rolls stay queued for Maintain to find.
	l.mu.Lock()
	l.sealRunning = true
	l.mu.Unlock()
	fillToRoll(t, l)
	mustAppend(t, l, valueBatch(4, 200, clock.now().UnixMilli()), 0) // rolls: one flush pending
	fillToRoll(t, l)
	var (
		rolled   atomic.Bool
		underMu  atomic.Int32
		appendCh = make(chan error, 1)
	)
	efs.SetInjector(func(op vfs.Op, path string) error {
		if !segmentSync(op, path) {
			return nil
		}
		if !l.mu.TryLock() {
			underMu.Add(1) // nobody else takes mu here: the flush holds it
			return nil
		}
		l.mu.Unlock()
		if rolled.CompareAndSwap(false, true) {
			// An append that rolls while the pending flush runs.
			_, err := l.Append(valueBatch(4, 200, clock.now().UnixMilli()), 0)
			appendCh <- err
		}
		return nil
	})
	if err := l.Maintain(clock.now()); err != nil {
		t.Fatalf("maintain: %v", err)
	}
	if err := <-appendCh; err != nil {
		t.Fatalf("append during the flush: %v", err)
	}
	if n := underMu.Load(); n > 0 {
		t.Fatalf("Maintain fsynced %d rolled segments holding the log's lock", n)
	}
	efs.SetInjector(nil)
	l.mu.Lock()
	l.sealRunning = false
	l.mu.Unlock()
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if rp, end := l.RecoveryPoint(), l.EndOffset(); rp != end {
		t.Fatalf("after Sync recovery point %d, end %d", rp, end)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}
