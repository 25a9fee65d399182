package segments

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/runnel/runnel/internal/alloctest"
	"github.com/runnel/runnel/segments/vfs"
)

// closeAllLogs opens, on fsys, logs in every state a close meets: written
// (one with a side file to write with it, one with an optional one, one
// with a few KiB), rolled (sealed segments and an active one), never
// written, and reopened clean and left unchanged; rescan is their
// Config.RescanBytes (the "big" log holds more than 1,000 bytes).
func closeAllLogs(t *testing.T, fsys vfs.FS, rescan int64) []Closing {
	t.Helper()
	opts := Options{FS: fsys}
	cfg := Config{RescanBytes: rescan}
	rolled := Config{SegmentBytes: 300, RescanBytes: rescan}
	clean := mustOpen(t, "/logs/clean", cfg, opts)
	mustAppend(t, clean, valueBatch(2, 10, 1000), 1)
	if err := clean.Close(); err != nil {
		t.Fatal(err)
	}
	out := []Closing{
		{Log: mustOpen(t, "/logs/clean", cfg, opts)},
		{Log: mustOpen(t, "/logs/written", cfg, opts)},
		{Log: mustOpen(t, "/logs/side", cfg, opts), Side: []SideFile{{Name: "high-watermark", Data: []byte("3 x\n")}}},
		{Log: mustOpen(t, "/logs/optional", cfg, opts), Side: []SideFile{{Name: "high-watermark", Data: []byte("3 x\n"), Optional: true}}},
		{Log: mustOpen(t, "/logs/rolled", rolled, opts)},
		{Log: mustOpen(t, "/logs/empty", cfg, opts)},
		{Log: mustOpen(t, "/logs/big", cfg, opts)},
	}
	mustAppend(t, out[1].Log, valueBatch(3, 10, 1000), 1)
	mustAppend(t, out[2].Log, valueBatch(3, 10, 1000), 2)
	mustAppend(t, out[3].Log, valueBatch(3, 10, 1000), 2)
	for i := range 6 {
		mustAppend(t, out[4].Log, valueBatch(2, 40, int64(1000+i)), 1)
	}
	for i := range 4 {
		mustAppend(t, out[6].Log, valueBatch(4, 100, int64(1000+i)), 1)
	}
	return out
}

// closeAllFS returns an ErrorFS over mem with inj, with a directory /logs,
// and a filesystem sync handle opened on it before any log is written (as
// CloseAll's caller does), closed when the test ends.
func closeAllFS(t *testing.T, mem *vfs.MemFS, inj vfs.Injector) (*vfs.ErrorFS, vfs.FSSync) {
	t.Helper()
	efs := vfs.NewErrorFS(mem, inj)
	if err := efs.MkdirAll("/logs"); err != nil {
		t.Fatal(err)
	}
	h, err := efs.OpenFSSync("/logs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return efs, h
}

// durable is every file a power cut would leave under /logs, by path.
func durable(t *testing.T, mem *vfs.MemFS) map[string][]byte {
	t.Helper()
	crashed := mem.Crash(nil)
	out := map[string][]byte{}
	dirs, err := crashed.List("/logs")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		names, err := crashed.List(filepath.Join("/logs", d))
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			path := filepath.Join("/logs", d, n)
			b, err := readFile(crashed, path)
			if err != nil {
				t.Fatal(err)
			}
			out[path] = b
		}
	}
	return out
}

// TestCloseAllAsClose (issue 19): with RescanBytes negative (every written
// log closed clean), CloseAll leaves on disk, through a power cut right
// after it, the very files, bytes included, that Close of each log and
// WriteSideFile of its side files leave (and the empty segment of a
// never-written log, which Close does not make durable); and it does so
// with three filesystem syncs, no fsync of any file or directory (Close: a
// dozen per written log).
func TestCloseAllAsClose(t *testing.T) {
	one := vfs.NewMemFS()
	for _, c := range closeAllLogs(t, one, -1) {
		for _, f := range c.Side {
			if err := c.Log.WriteSideFile(f.Name, f.Data); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Log.Close(); err != nil {
			t.Fatal(err)
		}
	}
	want := durable(t, one)

	all := vfs.NewMemFS()
	var syncs, fsyncs atomic.Int64
	counting, h := closeAllFS(t, all, func(op vfs.Op, _ string) error {
		switch op {
		case vfs.OpSyncFS:
			syncs.Add(1)
		case vfs.OpSync, vfs.OpSyncDir:
			fsyncs.Add(1)
		}
		return nil
	})
	logs := closeAllLogs(t, counting, -1)
	for _, c := range logs { // the rolls' own flushes, which Close would wait for too
		c.Log.lockQuiet()
		c.Log.unlockQuiet()
		c.Log.sealers.Wait()
	}
	fsyncs.Store(0)
	if err := CloseAll(h, logs, 2); err != nil {
		t.Fatal(err)
	}
	if s, f := syncs.Load(), fsyncs.Load(); s != 3 || f != 0 {
		t.Fatalf("CloseAll: %d filesystem syncs and %d fsyncs, want 3 and 0", s, f)
	}
	got := durable(t, all)
	for path, b := range want {
		if g, ok := got[path]; !ok || !bytes.Equal(g, b) {
			t.Errorf("%s after CloseAll and a crash: %q (present %v), after Close: %q", path, g, ok, b)
		}
	}
	for path, b := range got {
		// The filesystem's sync makes durable the entry of a never-written
		// log's empty segment too, which Close leaves as it is.
		if _, ok := want[path]; !ok && len(b) > 0 {
			t.Errorf("%s after CloseAll and a crash, not after Close", path)
		}
	}
	for _, c := range logs {
		if _, err := c.Log.Append(valueBatch(1, 10, 1000), 1); !errors.Is(err, ErrClosed) {
			t.Errorf("append to %s after CloseAll: %v, want ErrClosed", c.Log.dir, err)
		}
	}
}

// TestCloseAllFailedSync: when a filesystem sync of CloseAll fails, it
// says so and renames nothing more; after a power cut every log opens, a
// log is clean only with its index files, and every record appended is
// there once the first sync (the data's) succeeded; with logs left for
// their next open to rescan among them too.
func TestCloseAllFailedSync(t *testing.T) {
	for _, rescan := range []int64{-1, 1000} {
		for failAt := int64(1); failAt <= 3; failAt++ {
			t.Run(fmt.Sprintf("rescan-%d/sync-%d", rescan, failAt), func(t *testing.T) { testCloseAllFailedSync(t, rescan, failAt) })
		}
	}
}

func testCloseAllFailedSync(t *testing.T, rescan, failAt int64) {
	mem := vfs.NewMemFS()
	var n atomic.Int64
	efs, h := closeAllFS(t, mem, func(op vfs.Op, _ string) error {
		if op == vfs.OpSyncFS && n.Add(1) == failAt {
			return vfs.ErrInjected
		}
		return nil
	})
	logs := closeAllLogs(t, efs, rescan)
	ends := make([]int64, len(logs))
	for i, c := range logs {
		ends[i] = c.Log.EndOffset()
	}
	if err := CloseAll(h, logs, 2); !errors.Is(err, vfs.ErrInjected) {
		t.Fatalf("CloseAll with sync %d failing: %v", failAt, err)
	}
	crashed := mem.Crash(nil)
	for i, c := range logs {
		l := mustOpen(t, c.Log.dir, c.Log.cfg, Options{FS: crashed})
		if end := l.EndOffset(); failAt > 1 && end != ends[i] {
			t.Errorf("%s: end %d after a crash, want %d (the data's sync succeeded)", c.Log.dir, end, ends[i])
		}
		if end := l.EndOffset(); end > ends[i] {
			t.Errorf("%s: end %d after a crash, more than the %d appended", c.Log.dir, end, ends[i])
		}
		if l.EndOffset() > 0 {
			readAll(t, l, l.StartOffset(), 1<<20)
		}
		l.Close()
	}
}

// TestCloseAllNothingToSync: logs with nothing to make durable (never
// written, or clean on disk already) close without any sync.
func TestCloseAllNothingToSync(t *testing.T) {
	mem := vfs.NewMemFS()
	var syncs atomic.Int64
	efs, h := closeAllFS(t, mem, func(op vfs.Op, _ string) error {
		if op == vfs.OpSyncFS || op == vfs.OpSync || op == vfs.OpSyncDir {
			syncs.Add(1)
		}
		return nil
	})
	clean := mustOpen(t, "/logs/clean", Config{}, Options{FS: efs})
	mustAppend(t, clean, valueBatch(2, 10, 1000), 1)
	if err := clean.Close(); err != nil {
		t.Fatal(err)
	}
	logs := []Closing{{Log: mustOpen(t, "/logs/clean", Config{}, Options{FS: efs})}, {Log: mustOpen(t, "/logs/empty", Config{}, Options{FS: efs})}}
	syncs.Store(0)
	if err := CloseAll(h, logs, 2); err != nil {
		t.Fatal(err)
	}
	if n := syncs.Load(); n != 0 {
		t.Fatalf("CloseAll of logs with nothing to make durable: %d syncs, want 0", n)
	}
}

// closeCounts counts what an ErrorFS was asked to do.
type closeCounts struct{ creates, renames, writes, fsyncs, syncs atomic.Int64 }

func (c *closeCounts) injector(op vfs.Op, _ string) error {
	switch op {
	case vfs.OpCreate:
		c.creates.Add(1)
	case vfs.OpRename:
		c.renames.Add(1)
	case vfs.OpWrite, vfs.OpTruncate, vfs.OpRemove:
		c.writes.Add(1)
	case vfs.OpSync, vfs.OpSyncDir:
		c.fsyncs.Add(1)
	case vfs.OpSyncFS:
		c.syncs.Add(1)
	}
	return nil
}

func (c *closeCounts) reset() {
	for _, n := range []*atomic.Int64{&c.creates, &c.renames, &c.writes, &c.fsyncs, &c.syncs} {
		n.Store(0)
	}
}

// TestCloseAllSmallLogsWriteNothing (issue 19): closing many logs that each
// hold a few records past their saved recovery point writes no file of
// theirs: the one filesystem sync makes their data durable, and their next
// open recovers the small tail. Before, each written log cost four files
// created and renamed (two index files, log.state, the high watermark) and
// the close three filesystem syncs.
func TestCloseAllSmallLogsWriteNothing(t *testing.T) {
	const n = 50
	mem := vfs.NewMemFS()
	var c closeCounts
	efs, h := closeAllFS(t, mem, c.injector)
	logs := make([]Closing, n)
	ends := make([]int64, n)
	for i := range logs {
		dir := fmt.Sprintf("/logs/p%d", i)
		l, err := Create(dir, Config{}, Options{FS: efs})
		if err != nil {
			t.Fatal(err)
		}
		mustAppend(t, l, valueBatch(1+i%3, 100, 1000), 1)
		ends[i] = l.EndOffset()
		// A high watermark that only rose: the older file stays true.
		logs[i] = Closing{Log: l, Side: []SideFile{{Name: "high-watermark", Data: []byte("1 x\n"), Optional: true}}}
	}
	c.reset()
	if err := CloseAll(h, logs, 4); err != nil {
		t.Fatal(err)
	}
	if cr, rn, w, f, s := c.creates.Load(), c.renames.Load(), c.writes.Load(), c.fsyncs.Load(), c.syncs.Load(); cr != 0 || rn != 0 || w != 0 || f != 0 || s != 1 {
		t.Fatalf("CloseAll of %d small written logs: %d files created, %d renamed, %d writes, %d fsyncs, %d filesystem syncs; want 0, 0, 0, 0 and 1",
			n, cr, rn, w, f, s)
	}
	// A power cut right after: every log reopens with all it held, and the
	// open and a read write nothing.
	crashed := mem.Crash(nil)
	var after closeCounts
	cfs := vfs.NewErrorFS(crashed, after.injector)
	for i := range logs {
		l := mustOpen(t, fmt.Sprintf("/logs/p%d", i), Config{}, Options{FS: cfs})
		if end := l.EndOffset(); end != ends[i] {
			t.Errorf("p%d: end %d after CloseAll and a power cut, want %d", i, end, ends[i])
		}
		readAll(t, l, 0, 1<<20)
		if side, err := l.ReadSideFile("high-watermark"); err != nil || side != nil {
			t.Errorf("p%d: optional side file %q (%v) after CloseAll, want none written", i, side, err)
		}
		if cr, rn, w, f := after.creates.Load(), after.renames.Load(), after.writes.Load(), after.fsyncs.Load(); cr+rn+w+f != 0 {
			t.Fatalf("p%d: its open and a read after CloseAll: %d creates, %d renames, %d writes, %d fsyncs; want none", i, cr, rn, w, f)
		}
		l.Close()
		after.reset()
	}
}

// TestCloseAllPowerCutAnywhere (issue 19): a power cut before any step of
// a CloseAll that leaves some logs for their next open to rescan and
// closes the others clean (torn unsynced writes included) leaves every
// log opening with every byte that was durable before it, no more than was
// appended, everything once the first filesystem sync is done, and side
// files whole or absent; the logs left to rescan get no file created or
// renamed, and the close takes three filesystem syncs (one for the clean
// logs' files, two for their renames).
func TestCloseAllPowerCutAnywhere(t *testing.T) {
	mem := vfs.NewMemFS()
	var (
		syncs      int
		syncedFrom = math.MaxInt       // the first cut after the first filesystem sync
		touched    = map[string]bool{} // directories where a file was created or renamed
	)
	cuts := &powerCuts{mem: mem, rng: rand.New(rand.NewPCG(19, 2)), observe: func(op vfs.Op, path string, cut int) {
		switch op {
		case vfs.OpSyncFS:
			syncs++
			syncedFrom = min(syncedFrom, cut+1)
		case vfs.OpCreate, vfs.OpRename:
			touched[filepath.Dir(path)] = true
		}
	}}
	efs, h := closeAllFS(t, mem, cuts.injector)
	logs := closeAllLogs(t, efs, 1000)
	for _, c := range logs {
		// Some data durable before the close, some not.
		if l := c.Log; l.EndOffset() > 0 && l.dir != "/logs/clean" {
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			mustAppend(t, l, valueBatch(2, 30, 2000), 3)
		}
	}
	before := mem.Crash(nil)
	durable := make([][]byte, len(logs))
	all := make([][]byte, len(logs))
	for i, c := range logs {
		l := mustOpen(t, c.Log.dir, c.Log.cfg, Options{FS: before.Crash(nil)})
		durable[i] = readAll(t, l, 0, 1<<20)
		l.Close()
		all[i] = readAll(t, c.Log, 0, 1<<20)
	}
	cuts.start()
	if err := CloseAll(h, logs, 2); err != nil {
		t.Fatal(err)
	}
	cuts.stop("after CloseAll")
	if syncs != 3 {
		t.Errorf("CloseAll: %d filesystem syncs, want 3", syncs)
	}
	for _, dir := range []string{"/logs/written", "/logs/optional", "/logs/rolled"} {
		if touched[dir] {
			t.Errorf("%s: a file created or renamed by CloseAll, want none (left to rescan)", dir)
		}
	}
	for _, dir := range []string{"/logs/side", "/logs/big"} {
		if !touched[dir] {
			t.Errorf("%s: no file written by CloseAll, want a clean close", dir)
		}
	}
	taken := cuts.take()
	for ci, c := range taken {
		synced := ci >= syncedFrom || ci == len(taken)-1
		for i, lc := range logs {
			l := mustOpen(t, lc.Log.dir, lc.Log.cfg, Options{FS: c.fs})
			got := []byte{}
			if l.EndOffset() > l.StartOffset() {
				got = readAll(t, l, 0, 1<<20)
			}
			switch {
			case !bytes.HasPrefix(got, durable[i]):
				t.Errorf("cut before %s: %s holds %d bytes, not the %d durable before CloseAll", c.at, lc.Log.dir, len(got), len(durable[i]))
			case !bytes.HasPrefix(all[i], got):
				t.Errorf("cut before %s: %s holds %d bytes, not a prefix of the %d appended", c.at, lc.Log.dir, len(got), len(all[i]))
			case synced && len(got) != len(all[i]):
				t.Errorf("cut before %s: %s holds %d bytes after the first sync, want all %d", c.at, lc.Log.dir, len(got), len(all[i]))
			}
			if side, err := l.ReadSideFile("high-watermark"); err != nil || (side != nil && string(side) != "3 x\n") || (side != nil && lc.Log.dir == "/logs/optional") {
				t.Errorf("cut before %s: %s: high-watermark %q (%v)", c.at, lc.Log.dir, side, err)
			}
			mustAppend(t, l, valueBatch(1, 10, 3000), 4)
			if err := l.Close(); err != nil {
				t.Errorf("cut before %s: %s: close after reopening: %v", c.at, lc.Log.dir, err)
			}
		}
	}
}

// TestRescanOpenAllocatesLittle (issue 19): the open of a small log left
// by CloseAll for a rescan (one 100-byte batch), and of one after a crash,
// allocates in proportion to what it reads. Before, each of its three
// passes over the segment (the recovery scan, the transaction replays)
// allocated a 256 KiB read buffer, 768 KiB a log: at 10,000 logs opened
// on first use after a restart, 7.5 GiB for the collector to clear.
func TestRescanOpenAllocatesLittle(t *testing.T) {
	root := t.TempDir()
	syncer, ok := vfs.AsFSSyncer(vfs.OSFS())
	if !ok {
		t.Skip("no filesystem sync here")
	}
	h, err := syncer.OpenFSSync(root)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	dir := filepath.Join(root, "p0")
	l := mustOpen(t, dir, Config{}, Options{})
	mustAppend(t, l, valueBatch(1, 100, 1000), 1)
	if err := CloseAll(h, []Closing{{Log: l}}, 1); err != nil {
		t.Fatal(err)
	}
	abandon(mustOpen(t, dir, Config{}, Options{})) // the first open's one-time costs paid; left as CloseAll left it
	var again *Log
	n := alloctest.Bytes(func() { again = mustOpen(t, dir, Config{}, Options{}) })
	defer again.Close()
	if again.EndOffset() != 1 {
		t.Fatalf("reopened: end %d; want 1", again.EndOffset())
	}
	if limit := uint64(64 << 10); n > limit {
		t.Fatalf("open of a log left to rescan, one 100-byte batch: %d bytes allocated, want at most %d", n, limit)
	}
}
