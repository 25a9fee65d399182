package segments

import (
	"bytes"
	"encoding/binary"
	"path/filepath"
	"slices"
	"testing"

	"github.com/runnel/runnel/recordbatch"

	"github.com/runnel/runnel/segments/vfs"
)

// seedBatches returns valid and damaged batch byte strings for fuzz corpora.
func seedBatches() [][]byte {
	a := valueBatch(3, 20, 100)
	b := buildBatch([]rec{{key: []byte("k"), value: nil, ts: 5}})
	flipped := bytes.Clone(a)
	flipped[len(flipped)-1] ^= 0xff
	return [][]byte{a, b, append(bytes.Clone(a), b...), a[:30], flipped, append(bytes.Clone(a), 1, 2, 3)}
}

// FuzzRecoverSegment opens a log whose only segment holds arbitrary bytes
// after an unclean shutdown: no panic, the segment is cut to a prefix of
// whole valid batches, the indexes equal a rescan, and the log takes appends.
func FuzzRecoverSegment(f *testing.F) {
	for _, s := range seedBatches() {
		f.Add(s)
	}
	f.Add(bytes.Repeat([]byte{0xff}, 100))
	f.Fuzz(func(t *testing.T, data []byte) {
		const dir = "/f"
		mem := vfs.NewMemFS()
		mem.MkdirAll(dir)
		path := filepath.Join(dir, segmentName(0, logSuffix))
		w, _ := mem.Create(path)
		w.WriteAt(data, 0)
		w.Close()
		cfg := DefaultConfig()
		cfg.IndexIntervalBytes = 64
		l := mustOpen(t, dir, cfg, Options{FS: mem})
		defer l.Close()
		size := l.Size()
		if size > int64(len(data)) {
			t.Fatalf("recovered %d bytes from %d", size, len(data))
		}
		if size > 0 {
			got := readAll(t, l, l.StartOffset(), 1<<20)
			if !bytes.Equal(got, data[:len(got)]) {
				t.Fatal("recovered bytes are not a prefix of the segment")
			}
		}
		checkIndexes(t, l)
		end := l.EndOffset()
		if info := mustAppend(t, l, valueBatch(1, 5, 1), 0); info.BaseOffset != end {
			t.Fatalf("append at %d, end was %d", info.BaseOffset, end)
		}
	})
}

// FuzzRecords decodes the records of a batch with arbitrary attributes,
// count and payload, as compaction and timestamp search do with stored
// batches: errors, never panics.
func FuzzRecords(f *testing.F) {
	for _, s := range seedBatches() {
		if len(s) >= recordbatch.HeaderLen {
			h := recordbatch.ParseHeader(s)
			f.Add(h.Attributes, h.NumRecords, s[recordbatch.HeaderLen:])
		}
	}
	for codec := int16(1); codec <= 4; codec++ {
		f.Add(codec, int32(1), []byte{0, 1, 2, 3})
	}
	f.Fuzz(func(t *testing.T, attrs int16, n int32, payload []byte) {
		buf := make([]byte, recordbatch.HeaderLen, recordbatch.HeaderLen+len(payload))
		buf = append(buf, payload...)
		binary.BigEndian.PutUint16(buf[recordbatch.AttrAt:], uint16(attrs))
		binary.BigEndian.PutUint32(buf[recordbatch.NumRecordsAt:], uint32(n))
		binary.BigEndian.PutUint32(buf[recordbatch.LengthAt:], uint32(len(buf)-recordbatch.PrefixLen))
		h := recordbatch.ParseHeader(buf)
		_ = recordbatch.ForEachRecord(h, buf, func(recordbatch.RawRecord) bool { return true })
		c := cleaner{latest: map[string]int64{}}
		_, _ = c.filter(h, buf)
	})
}

// FuzzIndexFiles replaces the entries of the offset and time index files
// of the sealed first segment of a cleanly closed log with arbitrary bytes
// (seeded with the real ones), their checksum recomputed: what gets past
// the checksum (TestIndexChecksum) meets the consistency checks of
// loadIndexLocked (doc.go, Index files) and of each offset entry a read
// uses (checkEntry, which rebuilds the index), so whatever the bytes:
// every read answers what it did before; a timestamp lookup that
// succeeds answers a record at or past its timestamp (a time entry's
// timestamp changed on disk cannot be told from a right one) and exactly
// the answer before when the index in use is the one a rescan builds;
// nothing panics or hangs and the log takes appends.
func FuzzIndexFiles(f *testing.F) {
	const dir = "/idx"
	cfg := DefaultConfig()
	cfg.SegmentBytes = 4096
	cfg.IndexIntervalBytes = 300
	mem := vfs.NewMemFS()
	l := mustOpen(f, dir, cfg, Options{FS: mem})
	for i := range 60 {
		mustAppend(f, l, valueBatch(1+i%3, 80, int64(100+2*i)), 0)
	}
	want := readAll(f, l, 0, 1<<20)
	end := l.EndOffset()
	type lookup struct {
		off, ts int64
		ok      bool
	}
	probes := []int64{-1, 0, 99, 100, 101, 117, 130, 150, 161, 199, 220, 300}
	wantTs := make([]lookup, len(probes))
	for i, ts := range probes {
		off, got, ok, err := l.OffsetForTimestamp(ts)
		if err != nil {
			f.Fatal(err)
		}
		wantTs[i] = lookup{off, got, ok}
	}
	if err := l.Close(); err != nil {
		f.Fatal(err)
	}
	names, err := mem.List(dir)
	if err != nil {
		f.Fatal(err)
	}
	files := map[string][]byte{}
	for _, name := range names {
		if files[name], err = readFile(mem, filepath.Join(dir, name)); err != nil {
			f.Fatal(err)
		}
	}
	offsName, timesName := segmentName(0, indexSuffix), segmentName(0, timeIndexSuffix)
	// The seeds and inputs are entries; the test appends their checksum.
	offs, times := files[offsName], files[timesName]
	offs, times = offs[:len(offs)-indexCRCLen], times[:len(times)-indexCRCLen]
	if len(offs) < 3*indexEntryLen || len(times) < 3*timeEntryLen {
		f.Fatalf("first segment's index files: %d and %d bytes", len(offs), len(times))
	}
	f.Add(offs, times)
	f.Add(offs[:len(offs)-indexEntryLen], times)
	f.Add(offs, times[timeEntryLen:])
	f.Add([]byte{}, []byte{})
	f.Fuzz(func(t *testing.T, offs, times []byte) {
		mem := vfs.NewMemFS()
		mem.MkdirAll(dir)
		for name, b := range files {
			switch name {
			case offsName:
				b = appendFileCRC(bytes.Clone(offs))
			case timesName:
				b = appendFileCRC(bytes.Clone(times))
			}
			w, _ := mem.Create(filepath.Join(dir, name))
			w.WriteAt(b, 0)
			w.Close()
		}
		l := mustOpen(t, dir, cfg, Options{FS: mem})
		defer l.Close()
		exact := indexIsRebuild(t, l, 0)
		if got := readAll(t, l, 0, 1<<20); !bytes.Equal(got, want) {
			t.Fatal("the log reads differently")
		}
		for off := int64(0); off < end; off++ {
			b := readAll(t, l, off, 1)
			if h := recordbatch.ParseHeader(b); off < h.BaseOffset || off > h.LastOffset() {
				t.Fatalf("read %d got batch [%d, %d]", off, h.BaseOffset, h.LastOffset())
			}
		}
		for _, below := range []int64{1, 5, 7, 13, 29} {
			c, err := l.Read(0, 1<<20, below)
			if err != nil {
				t.Fatalf("read below %d: %v", below, err)
			}
			b, err := c.Bytes()
			c.Close()
			if err != nil {
				t.Fatal(err)
			}
			var h recordbatch.Header
			for rest := b; len(rest) >= recordbatch.HeaderLen; rest = rest[h.Size:] {
				h = recordbatch.ParseHeader(rest)
			}
			if h.BaseOffset >= below || h.LastOffset()+1 < below {
				t.Fatalf("read below %d ended with batch [%d, %d]", below, h.BaseOffset, h.LastOffset())
			}
		}
		for i, ts := range probes {
			off, got, ok, err := l.OffsetForTimestamp(ts)
			switch {
			case exact && (err != nil || (lookup{off, got, ok}) != wantTs[i]):
				t.Fatalf("timestamp lookup %d: %d@%d %v %v, want %+v", ts, off, got, ok, err, wantTs[i])
			case err == nil && ok && (got < ts || off < 0 || off >= end):
				t.Fatalf("timestamp lookup %d answered %d@%d", ts, off, got)
			}
		}
		if info := mustAppend(t, l, valueBatch(1, 5, 1), 0); info.BaseOffset != end {
			t.Fatalf("append at %d, end was %d", info.BaseOffset, end)
		}
	})
}

// indexIsRebuild loads the segment at base and reports whether its index
// is the one a rescan of the segment builds.
func indexIsRebuild(t *testing.T, l *Log, base int64) bool {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.segs[l.segmentForLocked(base)]
	if err := l.loadLocked(s); err != nil {
		t.Fatalf("load segment %d: %v", s.base, err)
	}
	cf, err := l.files.acquire(l.fs, s.path(l.dir))
	if err != nil {
		t.Fatal(err)
	}
	defer l.files.release(cf)
	r, err := scanSegment(cf.f, s.size, s.base, 0, 0, l.cfg.IndexIntervalBytes)
	if err != nil || r.stop != nil {
		t.Fatalf("rescan of segment %d: %v %v", s.base, err, r.stop)
	}
	return r.next == s.next && r.maxTs == s.maxTs && slices.Equal(r.idx.offsets, s.idx.offsets) && slices.Equal(r.idx.times, s.idx.times)
}
