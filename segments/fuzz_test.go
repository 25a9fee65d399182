package segments

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// seedBatches returns valid and damaged batch byte strings for fuzz corpora.
func seedBatches() [][]byte {
	a := valueBatch(3, 20, 100)
	b := buildBatch([]rec{{key: []byte("k"), value: nil, ts: 5}})
	flipped := bytes.Clone(a)
	flipped[len(flipped)-1] ^= 0xff
	return [][]byte{a, b, append(bytes.Clone(a), b...), a[:30], flipped, append(bytes.Clone(a), 1, 2, 3)}
}

// FuzzValidateBatch checks that batch validation never panics, and that
// whatever it accepts kmsg decodes as RecordBatch v2 with a matching CRC.
func FuzzValidateBatch(f *testing.F) {
	for _, s := range seedBatches() {
		f.Add(s, int32(0))
		f.Add(s, int32(90))
	}
	f.Fuzz(func(t *testing.T, data []byte, limit int32) {
		n, _, err := ValidateBatches(data, limit)
		if err != nil {
			if !errors.Is(err, ErrCorruptBatch) && !errors.Is(err, ErrBatchTooLarge) && !errors.Is(err, ErrInflatedTooLarge) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		for i := 0; i < n; i++ {
			var rb kmsg.RecordBatch
			if err := rb.ReadFrom(data); err != nil {
				t.Fatalf("accepted batch %d that kmsg cannot read: %v", i, err)
			}
			size := int(rb.Length) + batchPrefixLen
			if rb.Magic != 2 || uint32(rb.CRC) != crc32.Checksum(data[attrAt:size], castagnoli) {
				t.Fatalf("accepted batch %d with magic %d crc %x", i, rb.Magic, rb.CRC)
			}
			if int64(rb.NumRecords) != int64(rb.LastOffsetDelta)+1 {
				t.Fatalf("accepted batch %d with %d records, delta %d", i, rb.NumRecords, rb.LastOffsetDelta)
			}
			data = data[size:]
		}
		if len(data) != 0 {
			t.Fatalf("%d bytes left after %d accepted batches", len(data), n)
		}
	})
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
		mem := NewMemFS()
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
		if len(s) >= batchHeaderLen {
			h := parseHeader(s)
			f.Add(h.attributes, h.numRecords, s[batchHeaderLen:])
		}
	}
	for codec := int16(1); codec <= 4; codec++ {
		f.Add(codec, int32(1), []byte{0, 1, 2, 3})
	}
	f.Fuzz(func(t *testing.T, attrs int16, n int32, payload []byte) {
		buf := make([]byte, batchHeaderLen, batchHeaderLen+len(payload))
		buf = append(buf, payload...)
		binary.BigEndian.PutUint16(buf[attrAt:], uint16(attrs))
		binary.BigEndian.PutUint32(buf[numRecordsAt:], uint32(n))
		binary.BigEndian.PutUint32(buf[lengthAt:], uint32(len(buf)-batchPrefixLen))
		h := parseHeader(buf)
		_ = forEachRecord(h, buf, func(record) bool { return true })
		c := cleaner{latest: map[string]int64{}}
		_, _ = c.filter(h, buf)
	})
}

// FuzzCheckpoints feeds arbitrary bytes to the state and leader-epoch
// checkpoint decoders, and checks what they accept round-trips.
func FuzzCheckpoints(f *testing.F) {
	f.Add(logState{recoveryPoint: 5, startOffset: 2, clean: true, end: 9, activeBase: 3, activeSize: 100}.encode())
	f.Add(encodeEpochs([]epochEntry{{1, 0}, {4, 10}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		if st, err := decodeState(b); err == nil {
			if st2, err := decodeState(st.encode()); err != nil || st2 != st {
				t.Fatalf("state does not round-trip: %+v %+v %v", st, st2, err)
			}
		}
		if es, err := decodeEpochs(b); err == nil {
			if es2, err := decodeEpochs(encodeEpochs(es)); err != nil || len(es2) != len(es) {
				t.Fatalf("epochs do not round-trip: %v %v %v", es, es2, err)
			}
		}
	})
}

// FuzzValidateRecords feeds arbitrary record sections, counts and codecs
// to the record validator Append uses and to the incremental decoder
// readers use: typed errors, never a panic, and whatever the validator
// accepts decodes to exactly the records kmsg finds.
func FuzzValidateRecords(f *testing.F) {
	for _, s := range seedBatches() {
		if len(s) >= batchHeaderLen {
			h := parseHeader(s)
			f.Add(int16(0), h.numRecords, s[batchHeaderLen:])
			for codec := codecGzip; codec <= codecZstd; codec++ {
				if body, err := compress(codec, s[batchHeaderLen:], false); err == nil {
					f.Add(int16(codec), h.numRecords, body)
				}
			}
		}
	}
	f.Fuzz(func(t *testing.T, attrs int16, n int32, payload []byte) {
		const limit = 1 << 20
		header := make([]byte, batchHeaderLen)
		binary.BigEndian.PutUint16(header[attrAt:], uint16(attrs&0x3f))
		binary.BigEndian.PutUint32(header[numRecordsAt:], uint32(n))
		binary.BigEndian.PutUint32(header[lastOffsetDeltaAt:], uint32(n-1))
		header[magicAt] = 2
		buf := reframe(header, int(attrs&7), payload)
		h, err := checkBatch(buf, 0, countExact)
		if err != nil {
			return // Append stops at the header
		}
		err = validateRecords(h, buf, checkRules{exactOffsets: true, maxInflated: limit})
		if err != nil {
			if !errors.Is(err, ErrCorruptBatch) && !errors.Is(err, ErrInflatedTooLarge) {
				t.Fatalf("untyped error %v", err)
			}
		}
		it, derr := DecodeBatch(buf, limit)
		if derr != nil {
			if err == nil {
				t.Fatalf("validated, but DecodeBatch: %v", derr)
			}
			return
		}
		defer it.Close()
		var r Record
		got := 0
		for it.Next(&r) {
			if err == nil && r.Offset != int64(got) {
				t.Fatalf("record %d has offset %d", got, r.Offset)
			}
			got++
		}
		if err != nil {
			return
		}
		if it.Err() != nil || got != int(n) {
			t.Fatalf("validated %d records, decoded %d: %v", n, got, it.Err())
		}
		if attrs&7 != codecNone {
			return
		}
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(buf); err != nil {
			t.Fatalf("kmsg cannot read a validated batch: %v", err)
		}
		recs := make([]kmsg.Record, n)
		body := rb.Records
		for i := range recs {
			l, m := binary.Varint(body)
			if err := recs[i].ReadFrom(body[:m+int(l)]); err != nil {
				t.Fatalf("kmsg rejects validated record %d: %v", i, err)
			}
			body = body[m+int(l):]
		}
	})
}
