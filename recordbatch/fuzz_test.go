package recordbatch

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzValidateBatch checks that batch validation never panics, and that
// whatever it accepts kmsg decodes as RecordBatch v2 with a matching CRC.
func FuzzValidateBatch(f *testing.F) {
	for _, s := range seedBatches() {
		f.Add(s, int32(0))
		f.Add(s, int32(90))
	}
	f.Fuzz(func(t *testing.T, data []byte, limit int32) {
		n, _, err := Validate(data, limit, 32<<20)
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
			size := int(rb.Length) + PrefixLen
			if rb.Magic != 2 || uint32(rb.CRC) != crc32.Checksum(data[AttrAt:size], castagnoli) {
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

// FuzzValidateRecords feeds arbitrary record sections, counts and codecs
// to the record validator Append uses and to the incremental decoder
// readers use: typed errors, never a panic, and whatever the validator
// accepts decodes to exactly the records kmsg finds.
func FuzzValidateRecords(f *testing.F) {
	for _, s := range seedBatches() {
		if len(s) >= HeaderLen {
			h := ParseHeader(s)
			f.Add(int16(0), h.NumRecords, s[HeaderLen:])
			for codec := CodecGzip; codec <= CodecZstd; codec++ {
				if body, err := Compress(codec, s[HeaderLen:], false); err == nil {
					f.Add(int16(codec), h.NumRecords, body)
				}
			}
		}
	}
	f.Fuzz(func(t *testing.T, attrs int16, n int32, payload []byte) {
		const limit = 1 << 20
		header := make([]byte, HeaderLen)
		binary.BigEndian.PutUint16(header[AttrAt:], uint16(attrs&0x3f))
		binary.BigEndian.PutUint32(header[NumRecordsAt:], uint32(n))
		binary.BigEndian.PutUint32(header[LastOffsetDeltaAt:], uint32(n-1))
		header[MagicAt] = 2
		buf := reframe(header, int(attrs&7), payload)
		h, err := Check(buf, 0, CountExact)
		if err != nil {
			return // Append stops at the header
		}
		err = ValidateRecords(h, buf, Rules{ExactOffsets: true, MaxInflated: limit})
		if err != nil {
			if !errors.Is(err, ErrCorruptBatch) && !errors.Is(err, ErrInflatedTooLarge) {
				t.Fatalf("untyped error %v", err)
			}
		}
		it, derr := Decode(buf, limit)
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
		if attrs&7 != CodecNone {
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
