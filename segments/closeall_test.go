package segments

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/runnel/runnel/segments/vfs"
)

// closeAllLogs opens, on fsys, logs in every state a close meets: written
// (one with a side file to write with it), rolled (sealed segments and an
// active one), never written, and reopened clean and left unchanged.
func closeAllLogs(t *testing.T, fsys vfs.FS) []Closing {
	t.Helper()
	opts := Options{FS: fsys}
	rolled := Config{SegmentBytes: 300}
	clean := mustOpen(t, "/logs/clean", Config{}, opts)
	mustAppend(t, clean, valueBatch(2, 10, 1000), 1)
	if err := clean.Close(); err != nil {
		t.Fatal(err)
	}
	out := []Closing{
		{Log: mustOpen(t, "/logs/clean", Config{}, opts)},
		{Log: mustOpen(t, "/logs/written", Config{}, opts)},
		{Log: mustOpen(t, "/logs/side", Config{}, opts), Side: []SideFile{{"high-watermark", []byte("3 x\n")}}},
		{Log: mustOpen(t, "/logs/rolled", rolled, opts)},
		{Log: mustOpen(t, "/logs/empty", Config{}, opts)},
	}
	mustAppend(t, out[1].Log, valueBatch(3, 10, 1000), 1)
	mustAppend(t, out[2].Log, valueBatch(3, 10, 1000), 2)
	for i := range 6 {
		mustAppend(t, out[3].Log, valueBatch(2, 40, int64(1000+i)), 1)
	}
	return out
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

// TestCloseAllAsClose (issue 19): CloseAll leaves on disk, through a power
// cut right after it, the very files, bytes included, that Close of each
// log and WriteSideFile of its side files leave (and the empty segment of a
// never-written log, which Close does not make durable); and it does so with three
// filesystem syncs, no fsync of any file or directory (Close: a dozen per
// written log).
func TestCloseAllAsClose(t *testing.T) {
	one := vfs.NewMemFS()
	for _, c := range closeAllLogs(t, one) {
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
	counting := vfs.NewErrorFS(all, func(op vfs.Op, _ string) error {
		switch op {
		case vfs.OpSyncFS:
			syncs.Add(1)
		case vfs.OpSync, vfs.OpSyncDir:
			fsyncs.Add(1)
		}
		return nil
	})
	if err := counting.MkdirAll("/logs"); err != nil {
		t.Fatal(err)
	}
	h, err := counting.OpenFSSync("/logs")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	logs := closeAllLogs(t, counting)
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
// there once the first sync (the data's) succeeded.
func TestCloseAllFailedSync(t *testing.T) {
	for failAt := int64(1); failAt <= 3; failAt++ {
		t.Run(fmt.Sprint("sync-", failAt), func(t *testing.T) {
			mem := vfs.NewMemFS()
			var n atomic.Int64
			efs := vfs.NewErrorFS(mem, func(op vfs.Op, _ string) error {
				if op == vfs.OpSyncFS && n.Add(1) == failAt {
					return vfs.ErrInjected
				}
				return nil
			})
			if err := efs.MkdirAll("/logs"); err != nil {
				t.Fatal(err)
			}
			h, err := efs.OpenFSSync("/logs")
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			logs := closeAllLogs(t, efs)
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
		})
	}
}

// TestCloseAllNothingToSync: logs with nothing to make durable (never
// written, or clean on disk already) close without any sync.
func TestCloseAllNothingToSync(t *testing.T) {
	mem := vfs.NewMemFS()
	var syncs atomic.Int64
	efs := vfs.NewErrorFS(mem, func(op vfs.Op, _ string) error {
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
	h, err := efs.OpenFSSync("/logs")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	logs := []Closing{{Log: mustOpen(t, "/logs/clean", Config{}, Options{FS: efs})}, {Log: mustOpen(t, "/logs/empty", Config{}, Options{FS: efs})}}
	syncs.Store(0)
	if err := CloseAll(h, logs, 2); err != nil {
		t.Fatal(err)
	}
	if n := syncs.Load(); n != 0 {
		t.Fatalf("CloseAll of logs with nothing to make durable: %d syncs, want 0", n)
	}
}
