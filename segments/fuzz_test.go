package segments

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/runnel/runnel/internal/alloctest"

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

// FuzzCheckpoints feeds arbitrary bytes to the state file decoder (both
// versions, epoch lines included) and the previous release's
// leader-epoch-checkpoint decoder: what they accept round-trips, and what
// they allocate stays within alloctest's bound of the input (the bytes come
// from disk and are not trusted).
func FuzzCheckpoints(f *testing.F) {
	f.Add(logState{recoveryPoint: 5, startOffset: 2, clean: true, end: 9, activeBase: 3, activeSize: 100}.encode())
	f.Add(logState{recoveryPoint: 5, startOffset: 2, hasEpochs: true, epochs: []epochEntry{{1, 0}, {4, 10}}}.encode())
	f.Add([]byte("runnel-log-state 1\nrecovery-point 7\nstart-offset 0\nend\n"))
	f.Add([]byte("runnel-log-state 2\nrecovery-point 7\nstart-offset 0\n" + strings.Repeat("epoch 1 0\n", 50) + "end\n"))
	f.Add(encodeEpochs([]epochEntry{{1, 0}, {4, 10}}))
	f.Add([]byte("0\n99999999\n1 0\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var st logState
		var es []epochEntry
		var serr, eerr error
		if n := alloctest.Bytes(func() { st, serr = decodeState(b) }); n > alloctest.Limit(len(b), 0) {
			t.Fatalf("decodeState allocated %d bytes for %d", n, len(b))
		}
		if n := alloctest.Bytes(func() { es, eerr = decodeEpochs(b) }); n > alloctest.Limit(len(b), 0) {
			t.Fatalf("decodeEpochs allocated %d bytes for %d", n, len(b))
		}
		if serr == nil {
			st2, err := decodeState(st.encode())
			want := st
			want.hasEpochs = true // encode writes version 2
			if err != nil || fmt.Sprint(st2) != fmt.Sprint(want) {
				t.Fatalf("state does not round-trip: %+v %+v %v", want, st2, err)
			}
		}
		if eerr == nil {
			if es2, err := decodeEpochs(encodeEpochs(es)); err != nil || !slices.Equal(es2, es) {
				t.Fatalf("epochs do not round-trip: %v %v %v", es, es2, err)
			}
		}
	})
}
