package segments

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/runnel/runnel/recordbatch"
)

// withCodec recompresses the records of the uncompressed batch b with codec
// and fixes length, attributes and CRC, as a producer would have built it.
func withCodec(t testing.TB, b []byte, codec int, xerialFraming bool) []byte {
	t.Helper()
	body, err := recordbatch.Compress(codec, b[recordbatch.HeaderLen:], xerialFraming)
	if err != nil {
		t.Fatal(err)
	}
	return reframe(b[:recordbatch.HeaderLen], codec, body)
}

// reframe puts body after a copy of header with codec in the attributes and
// a recomputed length and CRC: garbage bodies pass every header check.
func reframe(header []byte, codec int, body []byte) []byte {
	out := append(bytes.Clone(header[:recordbatch.HeaderLen]), body...)
	attrs := binary.BigEndian.Uint16(out[recordbatch.AttrAt:])&^7 | uint16(codec)
	binary.BigEndian.PutUint16(out[recordbatch.AttrAt:], attrs)
	binary.BigEndian.PutUint32(out[recordbatch.LengthAt:], uint32(len(out)-recordbatch.PrefixLen))
	recordbatch.SetCRC(out)
	return out
}

// bombBatch is one batch of n records with values of size zero bytes each,
// compressed with codec: tiny on the wire, large inflated.
func bombBatch(t testing.TB, codec, n, size int) []byte {
	recs := make([]rec, n)
	for i := range recs {
		recs[i] = rec{key: []byte("k"), value: make([]byte, size), ts: 1}
	}
	return withCodec(t, buildBatch(recs), codec, false)
}

func TestAppendRefusesPoisonBatches(t *testing.T) {
	good := valueBatch(3, 20, 100)
	badCount := bytes.Clone(good)
	binary.BigEndian.PutUint32(badCount[recordbatch.NumRecordsAt:], 2)
	binary.BigEndian.PutUint32(badCount[recordbatch.LastOffsetDeltaAt:], 1)
	garbage := bytes.Repeat([]byte{0x5a}, 40)
	keyless := buildBatch([]rec{{key: nil, value: []byte("v"), ts: 1}})
	// Offset deltas 0, 0, 2 instead of 0, 1, 2.
	dupDelta := buildBatch([]rec{{key: []byte("a"), ts: 1}, {key: []byte("b"), ts: 1}, {key: []byte("c"), ts: 1}})
	recs := dupDelta[recordbatch.HeaderLen:]
	_, n := binary.Varint(recs)
	second := recs[n+int(recs[0]>>1):] // the first record's length is one byte
	_, n2 := binary.Varint(second)
	second[n2+1+1] = 0 // attributes, 1-byte timestamp delta, then the offset delta
	dupDelta = reframe(dupDelta, recordbatch.CodecNone, dupDelta[recordbatch.HeaderLen:])

	cases := []struct {
		name    string
		batch   []byte
		compact bool
		want    error
	}{
		{"gzip garbage body, valid CRC", reframe(good, recordbatch.CodecGzip, garbage), false, recordbatch.ErrCorruptBatch},
		{"zstd garbage body", reframe(good, recordbatch.CodecZstd, garbage), false, recordbatch.ErrCorruptBatch},
		{"lz4 garbage body", reframe(good, recordbatch.CodecLZ4, garbage), false, recordbatch.ErrCorruptBatch},
		{"snappy garbage body", reframe(good, recordbatch.CodecSnappy, garbage), false, recordbatch.ErrCorruptBatch},
		{"uncompressed garbage records", reframe(good, recordbatch.CodecNone, garbage), false, recordbatch.ErrCorruptBatch},
		{"fewer records than the count", reframe(good, recordbatch.CodecNone, good[recordbatch.HeaderLen:len(good)-26]), false, recordbatch.ErrCorruptBatch},
		{"bytes after the last record", reframe(good, recordbatch.CodecNone, append(bytes.Clone(good[recordbatch.HeaderLen:]), 0)), false, recordbatch.ErrCorruptBatch},
		{"gzip: more records than the count", withCodec(t, badCount, recordbatch.CodecGzip, false), false, recordbatch.ErrCorruptBatch},
		{"offset deltas not 0..n-1", dupDelta, false, recordbatch.ErrCorruptBatch},
		{"keyless record on a compacted log", keyless, true, recordbatch.ErrInvalidRecord},
		{"zstd bomb", bombBatch(t, recordbatch.CodecZstd, 10, 1<<20), false, recordbatch.ErrInflatedTooLarge},
		{"gzip bomb", bombBatch(t, recordbatch.CodecGzip, 10, 1<<20), false, recordbatch.ErrInflatedTooLarge},
		{"snappy bomb", bombBatch(t, recordbatch.CodecSnappy, 10, 1<<20), false, recordbatch.ErrInflatedTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.MaxInflatedBytes = 8 << 20
			if c.compact {
				cfg.CleanupPolicy = "compact"
			}
			l := mustOpen(t, t.TempDir(), cfg, Options{})
			defer l.Close()
			mustAppend(t, l, valueBatch(1, 5, 1), 0)
			// A bad batch after a good one in the same call: nothing is stored.
			in := append(valueBatch(2, 5, 1), c.batch...)
			if _, err := l.Append(in, 0); !errors.Is(err, c.want) {
				t.Fatalf("append: %v, want %v", err, c.want)
			}
			if l.EndOffset() != 1 {
				t.Fatalf("end offset %d after a refused append, want 1", l.EndOffset())
			}
		})
	}
}

func TestAppendAcceptsEveryCodec(t *testing.T) {
	l := mustOpen(t, t.TempDir(), DefaultConfig(), Options{})
	defer l.Close()
	plain := valueBatch(50, 300, 7)
	batches := [][]byte{plain, buildBatch([]rec{{key: []byte("k"), value: nil, ts: 1}})}
	for codec := recordbatch.CodecGzip; codec <= recordbatch.CodecZstd; codec++ {
		batches = append(batches, withCodec(t, plain, codec, false))
	}
	batches = append(batches, withCodec(t, plain, recordbatch.CodecSnappy, true))
	for i, b := range batches {
		if _, err := l.Append(b, 0); err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
	}
	// A batch inflating to just under the limit is fine.
	cfg := DefaultConfig()
	cfg.MaxInflatedBytes = 4 << 20
	l2 := mustOpen(t, t.TempDir(), cfg, Options{})
	defer l2.Close()
	if _, err := l2.Append(bombBatch(t, recordbatch.CodecZstd, 3, 1<<20), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := l2.Append(bombBatch(t, recordbatch.CodecZstd, 5, 1<<20), 0); !errors.Is(err, recordbatch.ErrInflatedTooLarge) {
		t.Fatalf("5 MiB with a 4 MiB limit: %v", err)
	}
}

// A batch stored undecodable (before records were validated: here through
// AppendReplicated, which trusts its leader) neither fails compaction nor
// timestamp search; compaction keeps it as it is.
func TestCompactionKeepsUndecodableBatch(t *testing.T) {
	cfg := DefaultConfig()
	cfg.CleanupPolicy = "compact"
	l := mustOpen(t, t.TempDir(), cfg, Options{})
	defer l.Close()
	good := buildBatch([]rec{{key: []byte("a"), value: []byte("1"), ts: 10}})
	bad := reframe(buildBatch([]rec{{key: []byte("a"), value: []byte("2"), ts: 20}}), recordbatch.CodecGzip, bytes.Repeat([]byte{0x5a}, 30))
	recordbatch.SetBaseOffset(bad, 1)
	mustAppend(t, l, good, 0)
	if _, err := l.AppendReplicated(bad); err != nil {
		t.Fatal(err)
	}
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, buildBatch([]rec{{key: []byte("a"), value: []byte("3"), ts: 30}}), 0)
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	if err := l.Maintain(time.UnixMilli(1000)); err != nil {
		t.Fatalf("compaction: %v", err)
	}
	if _, err := l.Append(buildBatch([]rec{{key: []byte("b"), ts: 40}}), 0); err != nil {
		t.Fatalf("append after compaction: %v", err)
	}
	if off, _, ok, err := l.OffsetForTimestamp(15); err != nil || !ok || off != 1 {
		t.Fatalf("timestamp 15: offset %d ok %v err %v", off, ok, err)
	}
	var bases []int64
	for off := l.StartOffset(); off < l.EndOffset(); {
		got := decodeBatches(t, readAll(t, l, off, 1<<20))
		for _, b := range got {
			bases = append(bases, b.FirstOffset)
			off = b.FirstOffset + int64(b.LastOffsetDelta) + 1
		}
	}
	if fmt.Sprint(bases) != "[1 2 3]" {
		t.Fatalf("batches after compaction at %v, want [1 2 3] (the undecodable one kept)", bases)
	}
}
