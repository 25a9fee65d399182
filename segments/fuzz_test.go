package segments

import (
	"bytes"
	"encoding/binary"
	"path/filepath"
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
