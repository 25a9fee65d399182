package segments

import (
	"bytes"
	"encoding/binary"
	"path/filepath"
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
