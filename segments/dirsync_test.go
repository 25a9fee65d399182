package segments

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runnel/runnel/segments/vfs"
)

// TestSegmentDirOpsAreSynced records the filesystem operations of each
// public call and checks that every creation, rename or removal of a
// segment file is followed by a directory fsync before the call returns
// (for a brand-new log: before its first fsync).
func TestSegmentDirOpsAreSynced(t *testing.T) {
	var mu sync.Mutex
	var ops []string
	efs := vfs.NewErrorFS(vfs.NewMemFS(), func(op vfs.Op, path string) error {
		mu.Lock()
		defer mu.Unlock()
		ops = append(ops, fmt.Sprintf("%v %s", op, path))
		return nil
	})
	check := func(call string) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		pending := ""
		for _, o := range ops {
			op, path, _ := strings.Cut(o, " ")
			switch {
			case op == "syncdir":
				pending = ""
			case (op == "create" || op == "remove") && strings.HasSuffix(path, logSuffix),
				op == "rename" && strings.HasSuffix(path, cleanedSuffix):
				pending = o
			}
		}
		if pending != "" {
			t.Fatalf("%s: %q not followed by a directory fsync (ops %v)", call, pending, ops)
		}
		ops = nil
	}
	cfg := DefaultConfig()
	cfg.SegmentBytes = 1024
	cfg.CleanupPolicy = "compact,delete"
	cfg.RetentionBytes = 4000
	now := time.UnixMilli(1_000_000)
	l := mustOpen(t, "/s", cfg, Options{FS: efs, Now: func() time.Time { return now }})
	// A brand-new log is created without fsyncs; its directory becomes
	// durable with its first fsync, before any data does.
	mustAppend(t, l, valueBatch(1, 10, now.UnixMilli()), 0)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	check("open, first append and sync")
	for i := 0; i < 40; i++ {
		// A roll's flush (directory fsync included) runs in the
		// background; Sync waits for it.
		mustAppend(t, l, buildBatch([]rec{{key: []byte{byte(i % 3)}, value: []byte("v"), ts: now.UnixMilli()}}), 0)
		syncOrFail(t, l)
		check("append")
		mustAppend(t, l, valueBatch(2, 100, now.UnixMilli()), 0)
		syncOrFail(t, l)
		check("append")
	}
	if err := l.Maintain(now); err != nil {
		t.Fatal(err)
	}
	check("maintain")
	if err := l.Truncate(l.EndOffset() - 30); err != nil {
		t.Fatal(err)
	}
	check("truncate")
	if err := l.DeleteRecordsBefore(l.EndOffset() - 3); err != nil {
		t.Fatal(err)
	}
	check("delete records")
	if err := l.Reset(500); err != nil {
		t.Fatal(err)
	}
	check("reset")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	check("close")
}

// TestNeverWrittenLogStaysBare: a log created empty and closed, then opened
// and closed again and again, keeps only its empty segment file (no state,
// index or checkpoint file: an empty partition costs its directory alone);
// reopened, its first write is as durable as a new log's, directory entry
// included.
func TestNeverWrittenLogStaysBare(t *testing.T) {
	mem := vfs.NewMemFS()
	dir := "/p"
	for range 3 {
		l := mustOpen(t, dir, Config{}, Options{FS: mem})
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		names, err := mem.List(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(names) != 1 || names[0] != segmentName(0, logSuffix) {
			t.Fatalf("files of a never-written log: %v", names)
		}
	}
	l := mustOpen(t, dir, Config{}, Options{FS: mem})
	mustAppend(t, l, valueBatch(2, 10, 1000), 1)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	l2 := mustOpen(t, dir, Config{}, Options{FS: mem.Crash(nil)})
	defer l2.Close()
	if end := l2.EndOffset(); end != 2 {
		t.Fatalf("after a crash, end offset %d, want 2", end)
	}
}

// TestCreate: Create makes an empty log that behaves as one Open made (its
// first write durable, directory entry included, through a crash), and
// refuses a directory that exists, on the OS filesystem and on MemFS.
func TestCreate(t *testing.T) {
	mem := vfs.NewMemFS()
	for name, opts := range map[string]Options{"os": {}, "mem": {FS: mem}} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "p")
			if name == "mem" {
				dir = "/c/p"
				if err := mem.MkdirAll("/c"); err != nil {
					t.Fatal(err)
				}
			}
			l, err := Create(dir, Config{}, opts)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Create(dir, Config{}, opts); !errors.Is(err, fs.ErrExist) {
				t.Fatalf("Create on an existing directory: %v, want fs.ErrExist", err)
			}
			mustAppend(t, l, valueBatch(3, 10, 1000), 1)
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			reopenOpts := opts
			if name == "mem" {
				reopenOpts.FS = mem.Crash(nil)
			} else {
				l.Close()
			}
			l2 := mustOpen(t, dir, Config{}, reopenOpts)
			defer l2.Close()
			if end := l2.EndOffset(); end != 3 {
				t.Fatalf("end offset %d after reopening, want 3", end)
			}
		})
	}
}

func syncOrFail(t *testing.T, l *Log) {
	t.Helper()
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
}
