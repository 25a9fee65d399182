package segments

import (
	"bytes"
	"encoding/binary"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/runnel/runnel/recordbatch"

	"github.com/runnel/runnel/segments/vfs"
)

// TestIndexRebuild damages the index files of a sealed segment of a cleanly
// closed log in different ways; reads must stay right and the indexes end
// up equal to a rebuild.
func TestIndexRebuild(t *testing.T) {
	const dir = "/idx"
	cfg := DefaultConfig()
	cfg.SegmentBytes = 4096
	cfg.IndexIntervalBytes = 300
	tests := []struct {
		name   string
		suffix string
		damage func([]byte) []byte
	}{
		{"missing offset index", indexSuffix, func([]byte) []byte { return nil }},
		{"missing time index", timeIndexSuffix, func([]byte) []byte { return nil }},
		{"odd length", indexSuffix, func(b []byte) []byte { return b[:len(b)-3] }},
		{"position off by one", indexSuffix, func(b []byte) []byte {
			b = bytes.Clone(b)
			n := len(b) - indexEntryLen
			binary.BigEndian.PutUint32(b[n+4:], binary.BigEndian.Uint32(b[n+4:])+1)
			return b
		}},
		{"not increasing", indexSuffix, func(b []byte) []byte {
			b = bytes.Clone(b)
			copy(b[indexEntryLen:2*indexEntryLen], b[:indexEntryLen])
			return b
		}},
		{"entries cut", indexSuffix, func(b []byte) []byte { return b[:indexEntryLen] }},
		{"time garbage", timeIndexSuffix, func(b []byte) []byte { return bytes.Repeat([]byte{0xee}, len(b)) }},
		// Found by FuzzIndexFiles: a time entry whose offset is past the
		// segment's end (the entry a lookup starts from) made timestamp
		// lookups skip the whole segment.
		{"time entry past the end", timeIndexSuffix, func(b []byte) []byte {
			b = bytes.Clone(b)
			n := len(b) - timeEntryLen
			binary.BigEndian.PutUint32(b[n+8:], binary.BigEndian.Uint32(b[n+8:])+1000)
			return b
		}},
		{"one time entry far past the end", timeIndexSuffix, func([]byte) []byte {
			return []byte("\x00\x00\x00\x00\x00\x00\x00\x30\x30\x30\x30\x30")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := vfs.NewMemFS()
			l := mustOpen(t, dir, cfg, Options{FS: mem})
			for i := 0; i < 60; i++ {
				mustAppend(t, l, valueBatch(2, 80, int64(100+i)), 0)
			}
			want := readAll(t, l, 0, 1<<20)
			wantOff, wantTs, _, _ := l.OffsetForTimestamp(130)
			l.Close()
			path := filepath.Join(dir, segmentName(0, tt.suffix))
			old, err := readFile(mem, path)
			if err != nil || len(old) == 0 {
				t.Fatalf("index file: %v", err)
			}
			if nb := tt.damage(old); nb == nil {
				mem.Remove(path)
			} else {
				f, _ := mem.Create(path)
				f.WriteAt(nb, 0)
				f.Close()
			}
			l = mustOpen(t, dir, cfg, Options{FS: mem})
			defer l.Close()
			if got := readAll(t, l, 0, 1<<20); !bytes.Equal(got, want) {
				t.Fatal("first segment reads differently")
			}
			for off := int64(0); off < l.EndOffset(); off += 7 {
				b := readAll(t, l, off, 1)
				if h := recordbatch.ParseHeader(b); off < h.BaseOffset || off > h.LastOffset() {
					t.Fatalf("read %d got batch [%d, %d]", off, h.BaseOffset, h.LastOffset())
				}
			}
			if off, ts, _, _ := l.OffsetForTimestamp(130); off != wantOff || ts != wantTs {
				t.Fatalf("timestamp lookup %d@%d, want %d@%d", off, ts, wantOff, wantTs)
			}
			checkIndexes(t, l)
		})
	}
}

// TestIndexEntryOffItsBatch: an offset entry that is not at its batch,
// still in order and inside the segment, passes the checks on load when
// the checksum matches (as after the segment changed under its index); a
// read that starts or jumps from it finds that the
// entry is not its batch's, rebuilds the index and answers right, where it
// skipped records or passed its limit (found by FuzzIndexFiles).
func TestIndexEntryOffItsBatch(t *testing.T) {
	const dir = "/idx"
	cfg := DefaultConfig()
	cfg.SegmentBytes = 4096
	cfg.IndexIntervalBytes = 300
	// Batches [0], [1,2], [3,5], [6], [7,8], [9,11]...; offset entries at
	// 0, 3, 6, 9...
	tests := []struct {
		name                string
		entry               int    // which offset entry
		rel, pos            uint32 // changed to (0: as it was)
		off, maxOffset      int64  // the read
		wantFirst, wantLast int64  // the batches it answers
	}{
		// A read of 2 started at the batch of 3.
		{name: "offset", entry: 1, rel: 2, off: 2, maxOffset: -1, wantFirst: 1, wantLast: 32},
		// A read below 7 took the batches before the entry of 9 whole,
		// [7,8] with them.
		{name: "jump", entry: 3, rel: 7, off: 0, maxOffset: 7, wantFirst: 0, wantLast: 6},
		// A read of 7 started inside the batch [3,5] and failed.
		{name: "position", entry: 2, pos: 500, off: 7, maxOffset: -1, wantFirst: 7, wantLast: 32},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := writeIndexedLog(t, dir, cfg)
			changeIndexFile(t, mem, filepath.Join(dir, segmentName(0, indexSuffix)), func(b []byte) {
				at := tt.entry * indexEntryLen
				if got := binary.BigEndian.Uint32(b[at:]); got != 3*uint32(tt.entry) {
					t.Fatalf("entry %d is for offset %d, want %d", tt.entry, got, 3*tt.entry)
				}
				if tt.rel != 0 {
					binary.BigEndian.PutUint32(b[at:], tt.rel)
				}
				if tt.pos != 0 {
					binary.BigEndian.PutUint32(b[at+4:], tt.pos)
				}
			})
			l := mustOpen(t, dir, cfg, Options{FS: mem})
			defer l.Close()
			if e := loadedOffsetEntry(t, l, 0, tt.entry); (tt.rel != 0 && e.rel != tt.rel) || (tt.pos != 0 && e.pos != tt.pos) {
				t.Fatalf("the changed entry did not pass the load: %+v", e)
			}
			c, err := l.Read(tt.off, 1<<20, tt.maxOffset)
			if err != nil {
				t.Fatalf("read %d: %v", tt.off, err)
			}
			got, err := c.Bytes()
			c.Close()
			if err != nil {
				t.Fatal(err)
			}
			var first, last recordbatch.Header
			for rest := got; len(rest) >= recordbatch.HeaderLen; rest = rest[last.Size:] {
				if last = recordbatch.ParseHeader(rest); first.Size == 0 {
					first = last
				}
			}
			if first.BaseOffset != tt.wantFirst || last.LastOffset() != tt.wantLast {
				t.Fatalf("read %d (below %d) answered batches [%d, %d], want [%d, %d]", tt.off, tt.maxOffset, first.BaseOffset, last.LastOffset(), tt.wantFirst, tt.wantLast)
			}
			checkIndexes(t, l)
		})
	}
}

// TestTruncateThroughEntryOffItsBatch: a Truncate whose cut is found from
// an offset entry that is not at its batch (an index file changed on disk
// and passing the checks on load) rebuilds the index and cuts where it
// should, as a read does (TestIndexEntryOffItsBatch). It failed the log
// instead: every later append refused until a reopen.
func TestTruncateThroughEntryOffItsBatch(t *testing.T) {
	const dir = "/idx"
	cfg := DefaultConfig()
	cfg.SegmentBytes = 4096
	cfg.IndexIntervalBytes = 300
	mem := writeIndexedLog(t, dir, cfg)
	changeIndexFile(t, mem, filepath.Join(dir, segmentName(0, indexSuffix)), func(b []byte) {
		if got := binary.BigEndian.Uint32(b[indexEntryLen:]); got != 3 {
			t.Fatalf("second entry is for offset %d, want 3", got)
		}
		binary.BigEndian.PutUint32(b[indexEntryLen:], 2) // the batch [3,5] said at offset 2
	})
	l := mustOpen(t, dir, cfg, Options{FS: mem})
	defer l.Close()
	if e := loadedOffsetEntry(t, l, 0, 1); e.rel != 2 {
		t.Fatalf("the changed entry did not pass the load: %+v", e)
	}
	if err := l.Truncate(2); err != nil {
		t.Fatalf("truncate through the changed entry: %v", err)
	}
	if end := l.EndOffset(); end != 1 {
		t.Fatalf("end %d after truncating to 2 (the batch [1,2] cut whole), want 1", end)
	}
	if info := mustAppend(t, l, valueBatch(1, 10, 1), 0); info.BaseOffset != 1 {
		t.Fatalf("append after the truncation at %d, want 1", info.BaseOffset)
	}
	checkIndexes(t, l)
}

// writeIndexedLog writes and closes a log in dir of a new MemFS: batches
// [0], [1,2], [3,5], [6], [7,8], [9,11]... (60 of them, timestamps 100,
// 102...), with cfg's index.interval.bytes of 300 offset entries at 0, 3,
// 6, 9...
func writeIndexedLog(t *testing.T, dir string, cfg Config) *vfs.MemFS {
	t.Helper()
	mem := vfs.NewMemFS()
	l := mustOpen(t, dir, cfg, Options{FS: mem})
	for i := range 60 {
		mustAppend(t, l, valueBatch(1+i%3, 80, int64(100+2*i)), 0)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return mem
}

// loadedOffsetEntry loads the segment at base and returns its i-th offset
// entry.
func loadedOffsetEntry(t *testing.T, l *Log, base int64, i int) indexEntry {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.segs[l.segmentForLocked(base)]
	if err := l.loadLocked(s); err != nil {
		t.Fatal(err)
	}
	if i >= len(s.idx.offsets) {
		t.Fatalf("segment %d has %d offset entries", base, len(s.idx.offsets))
	}
	return s.idx.offsets[i]
}

// changeIndexFile rewrites the index file at path with its entries
// changed by change and its checksum recomputed: a change the checksum
// cannot tell (as if the segment had changed instead).
func changeIndexFile(t *testing.T, mem *vfs.MemFS, path string, change func(entries []byte)) {
	t.Helper()
	b, err := readFile(mem, path)
	if err != nil || b == nil {
		t.Fatalf("index file %s: %v", path, err)
	}
	b = b[:len(b)-indexCRCLen]
	change(b)
	b = appendFileCRC(b)
	w, err := mem.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w.WriteAt(b, 0)
	w.Close()
}

// TestIndexChecksum: the index files of a sealed segment end in a CRC-32C
// of their entries. A time entry whose timestamp changed on disk (still in
// order, so it passed every other check) sent a timestamp lookup past
// records at or after its timestamp, to a later record; its checksum now
// fails, and the index is rebuilt from the segment. A file of the previous
// release, without the checksum, is rebuilt once and written with it.
func TestIndexChecksum(t *testing.T) {
	const dir = "/idx"
	cfg := DefaultConfig()
	cfg.SegmentBytes = 4096
	cfg.IndexIntervalBytes = 300
	for _, tc := range []struct {
		name   string
		suffix string
		change func(t *testing.T, b []byte) []byte
	}{
		{"a time entry's timestamp lowered", timeIndexSuffix, func(t *testing.T, b []byte) []byte {
			t1 := int64(binary.BigEndian.Uint64(b[timeEntryLen:]))
			t2 := int64(binary.BigEndian.Uint64(b[2*timeEntryLen:]))
			if t2 < t1+3 {
				t.Fatalf("time entries 1 and 2 at %d and %d: too close", t1, t2)
			}
			binary.BigEndian.PutUint64(b[2*timeEntryLen:], uint64(t1+1))
			return b
		}},
		{"offset index of the previous release", indexSuffix, func(t *testing.T, b []byte) []byte {
			return b[:len(b)-len(b)%indexEntryLen]
		}},
		{"time index of the previous release", timeIndexSuffix, func(t *testing.T, b []byte) []byte {
			return b[:len(b)-len(b)%timeEntryLen]
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMemFS()
			l := mustOpen(t, dir, cfg, Options{FS: mem})
			for i := range 60 {
				mustAppend(t, l, valueBatch(1+i%3, 80, int64(100+2*i)), 0)
			}
			want := readAll(t, l, 0, 1<<20)
			type answer struct {
				off, ts int64
				ok      bool
			}
			answers := map[int64]answer{}
			for ts := int64(90); ts < 240; ts++ {
				off, got, ok, err := l.OffsetForTimestamp(ts)
				if err != nil {
					t.Fatal(err)
				}
				answers[ts] = answer{off, got, ok}
			}
			l.Close()
			path := filepath.Join(dir, segmentName(0, tc.suffix))
			b, err := readFile(mem, path)
			if err != nil || b == nil {
				t.Fatalf("index file: %v", err)
			}
			b = tc.change(t, b)
			w, _ := mem.Create(path)
			w.WriteAt(b, 0)
			w.Close()
			l = mustOpen(t, dir, cfg, Options{FS: mem})
			defer l.Close()
			for ts := int64(90); ts < 240; ts++ {
				off, got, ok, err := l.OffsetForTimestamp(ts)
				if a := (answer{off, got, ok}); err != nil || a != answers[ts] {
					t.Fatalf("timestamp lookup %d: %+v %v, want %+v", ts, a, err, answers[ts])
				}
			}
			if got := readAll(t, l, 0, 1<<20); !bytes.Equal(got, want) {
				t.Fatal("the log reads differently")
			}
			checkIndexes(t, l)
			for _, f := range []struct {
				suffix string
				n      int
			}{{indexSuffix, indexEntryLen}, {timeIndexSuffix, timeEntryLen}} {
				b, err := readFile(mem, filepath.Join(dir, segmentName(0, f.suffix)))
				if err != nil || b == nil {
					t.Fatalf("%s after the rebuild: %v", f.suffix, err)
				}
				if len(b)%f.n != indexCRCLen {
					t.Fatalf("%s after the rebuild: %d bytes, not entries of %d and a checksum", f.suffix, len(b), f.n)
				}
			}
		})
	}
}

// TestUpgradeRebuildLoggedOnce: after an upgrade every sealed segment's
// index files lack the checksum and are rebuilt on first read. That is
// expected, so it is said once at Info per process; each further segment
// is a Debug line (an Info line per segment flooded the log of a node
// holding thousands of segments).
func TestUpgradeRebuildLoggedOnce(t *testing.T) {
	const dir = "/upgrade"
	cfg := DefaultConfig()
	cfg.SegmentBytes = 1024
	cfg.IndexIntervalBytes = 100
	mem := vfs.NewMemFS()
	l := mustOpen(t, dir, cfg, Options{FS: mem})
	for i := range 40 {
		mustAppend(t, l, valueBatch(1, 80, int64(100+i)), 0)
	}
	want := readAll(t, l, 0, 1<<20)
	sealed := len(l.segs) - 1
	l.Close()
	if sealed < 3 {
		t.Fatalf("%d sealed segments, want several", sealed)
	}
	// Each sealed segment's index files as the previous release wrote
	// them: entries, no checksum.
	for _, s := range l.segs[:sealed] {
		for _, f := range []struct {
			suffix string
			n      int
		}{{indexSuffix, indexEntryLen}, {timeIndexSuffix, timeEntryLen}} {
			path := filepath.Join(dir, segmentName(s.base, f.suffix))
			b, err := readFile(mem, path)
			if err != nil || b == nil {
				t.Fatalf("index file %s: %v", path, err)
			}
			w, _ := mem.Create(path)
			w.WriteAt(b[:len(b)-len(b)%f.n], 0)
			w.Close()
		}
	}
	upgradeRebuilds.Store(0) // a process's first upgrade
	var logs bytes.Buffer
	l = mustOpen(t, dir, cfg, Options{FS: mem, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	defer l.Close()
	if got := readAll(t, l, 0, 1<<20); !bytes.Equal(got, want) {
		t.Fatal("the log reads differently")
	}
	for ts := int64(100); ts < 140; ts++ { // each segment's indexes in use
		if off, _, ok, err := l.OffsetForTimestamp(ts); err != nil || !ok || off != ts-100 {
			t.Fatalf("timestamp %d: offset %d %v %v, want %d", ts, off, ok, err, ts-100)
		}
	}
	info, debug := 0, 0
	for _, line := range strings.Split(logs.String(), "\n") {
		if !strings.Contains(line, "index") || !strings.Contains(line, "previous release") {
			continue
		}
		switch {
		case strings.Contains(line, "level=INFO"):
			info++
		case strings.Contains(line, "level=DEBUG"):
			debug++
		}
	}
	if info != 1 || debug != sealed-1 {
		t.Fatalf("%d Info and %d Debug lines for %d rebuilt segments, want 1 and %d:\n%s", info, debug, sealed, sealed-1, logs.String())
	}
}
