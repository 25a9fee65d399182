package segments

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// withCodec recompresses the records of the uncompressed batch b with codec
// and fixes length, attributes and CRC, as a producer would have built it.
func withCodec(t testing.TB, b []byte, codec int, xerialFraming bool) []byte {
	t.Helper()
	body, err := compress(codec, b[batchHeaderLen:], xerialFraming)
	if err != nil {
		t.Fatal(err)
	}
	return reframe(b[:batchHeaderLen], codec, body)
}

// reframe puts body after a copy of header with codec in the attributes and
// a recomputed length and CRC: garbage bodies pass every header check.
func reframe(header []byte, codec int, body []byte) []byte {
	out := append(bytes.Clone(header[:batchHeaderLen]), body...)
	attrs := binary.BigEndian.Uint16(out[attrAt:])&^7 | uint16(codec)
	binary.BigEndian.PutUint16(out[attrAt:], attrs)
	binary.BigEndian.PutUint32(out[lengthAt:], uint32(len(out)-batchPrefixLen))
	binary.BigEndian.PutUint32(out[crcAt:], crc32.Checksum(out[attrAt:], castagnoli))
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
	binary.BigEndian.PutUint32(badCount[numRecordsAt:], 2)
	binary.BigEndian.PutUint32(badCount[lastOffsetDeltaAt:], 1)
	garbage := bytes.Repeat([]byte{0x5a}, 40)
	keyless := buildBatch([]rec{{key: nil, value: []byte("v"), ts: 1}})
	// Offset deltas 0, 0, 2 instead of 0, 1, 2.
	dupDelta := buildBatch([]rec{{key: []byte("a"), ts: 1}, {key: []byte("b"), ts: 1}, {key: []byte("c"), ts: 1}})
	recs := dupDelta[batchHeaderLen:]
	_, n := binary.Varint(recs)
	second := recs[n+int(recs[0]>>1):] // the first record's length is one byte
	_, n2 := binary.Varint(second)
	second[n2+1+1] = 0 // attributes, 1-byte timestamp delta, then the offset delta
	dupDelta = reframe(dupDelta, codecNone, dupDelta[batchHeaderLen:])

	cases := []struct {
		name    string
		batch   []byte
		compact bool
		want    error
	}{
		{"gzip garbage body, valid CRC", reframe(good, codecGzip, garbage), false, ErrCorruptBatch},
		{"zstd garbage body", reframe(good, codecZstd, garbage), false, ErrCorruptBatch},
		{"lz4 garbage body", reframe(good, codecLZ4, garbage), false, ErrCorruptBatch},
		{"snappy garbage body", reframe(good, codecSnappy, garbage), false, ErrCorruptBatch},
		{"uncompressed garbage records", reframe(good, codecNone, garbage), false, ErrCorruptBatch},
		{"fewer records than the count", reframe(good, codecNone, good[batchHeaderLen:len(good)-26]), false, ErrCorruptBatch},
		{"bytes after the last record", reframe(good, codecNone, append(bytes.Clone(good[batchHeaderLen:]), 0)), false, ErrCorruptBatch},
		{"gzip: more records than the count", withCodec(t, badCount, codecGzip, false), false, ErrCorruptBatch},
		{"offset deltas not 0..n-1", dupDelta, false, ErrCorruptBatch},
		{"keyless record on a compacted log", keyless, true, ErrInvalidRecord},
		{"zstd bomb", bombBatch(t, codecZstd, 10, 1<<20), false, ErrInflatedTooLarge},
		{"gzip bomb", bombBatch(t, codecGzip, 10, 1<<20), false, ErrInflatedTooLarge},
		{"snappy bomb", bombBatch(t, codecSnappy, 10, 1<<20), false, ErrInflatedTooLarge},
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
	for codec := codecGzip; codec <= codecZstd; codec++ {
		batches = append(batches, withCodec(t, plain, codec, false))
	}
	batches = append(batches, withCodec(t, plain, codecSnappy, true))
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
	if _, err := l2.Append(bombBatch(t, codecZstd, 3, 1<<20), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := l2.Append(bombBatch(t, codecZstd, 5, 1<<20), 0); !errors.Is(err, ErrInflatedTooLarge) {
		t.Fatalf("5 MiB with a 4 MiB limit: %v", err)
	}
}

func TestDecodeBatchStopsEarly(t *testing.T) {
	b := withCodec(t, buildBatch([]rec{{key: []byte("k"), value: []byte("v1"), ts: 5}, {key: nil, value: nil, ts: 6}}), codecLZ4, false)
	it, err := DecodeBatch(b, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var got []Record
	var r Record
	for it.Next(&r) {
		got = append(got, r)
	}
	if it.Err() != nil || len(got) != 2 || string(got[0].Value) != "v1" || got[1].Value != nil || got[1].Key != nil ||
		got[0].Offset != 0 || got[1].Offset != 1 || got[1].Timestamp != 6 || got[0].Size != 10 {
		t.Fatalf("decoded %+v, err %v", got, it.Err())
	}

	// A reader asking for one record of a large batch allocates about one
	// record, not the batch.
	big := bombBatch(t, codecZstd, 4000, 4<<10) // 16 MB inflated
	// Pooled decoders are dropped at a GC (and, under -race, sync.Pool
	// drops a quarter of what is put back), and a fresh zstd decoder
	// allocates its window. So: warm the pool up, keep the GC out, and
	// take the cheapest of 5 reads, which reuses a decoder unless all 5
	// missed the pool. Inflating the batch would cost 16 MB every time.
	if it, err := DecodeBatch(big, 1<<20); err == nil {
		it.Next(&r)
		it.Close()
	}
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	cheapest := uint64(1 << 62)
	for range 5 {
		var ms1, ms2 runtimeMem
		ms1.read()
		it, _ := DecodeBatch(big, 1<<20)
		it.Next(&r)
		it.Close()
		ms2.read()
		cheapest = min(cheapest, ms2.total-ms1.total)
	}
	t.Logf("cheapest read: %d bytes", cheapest)
	if cheapest > 4<<20 {
		t.Fatalf("the cheapest of 5 one-record reads of a 16 MB batch allocated %d bytes", cheapest)
	}

	// A record larger than the reader's bound is refused, not inflated.
	it, err = DecodeBatch(bombBatch(t, codecGzip, 1, 2<<20), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if it.Next(&r) || !errors.Is(it.Err(), ErrInflatedTooLarge) {
		t.Fatalf("2 MiB record with a 1 MiB bound: %v", it.Err())
	}
	it.Close()
}

type runtimeMem struct{ total uint64 }

func (m *runtimeMem) read() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.total = ms.TotalAlloc
}

// BenchmarkValidateRecords is the per-batch cost of record validation
// (100 JSON-like 1 KiB records per batch) by codec.
func BenchmarkValidateRecords(b *testing.B) {
	recs := make([]rec, 100)
	for i := range recs {
		v := bytes.Repeat([]byte(fmt.Sprintf(`{"sku":"SKU-%05d","qty":%d},`, i*7919%100000, i%9)), 40)[:1024]
		recs[i] = rec{key: []byte("k"), value: v, ts: int64(i)}
	}
	plain := buildBatch(recs)
	for codec := codecNone; codec <= codecZstd; codec++ {
		batch := plain
		if codec != codecNone {
			batch = withCodec(b, plain, codec, false)
		}
		h, err := checkBatch(batch, 0, countExact)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("codec=%d", codec), func(b *testing.B) {
			b.SetBytes(int64(len(plain)))
			b.ReportAllocs()
			for range b.N {
				if err := validateRecords(h, batch, checkRules{exactOffsets: true, maxInflated: 1 << 25}); err != nil {
					b.Fatal(err)
				}
			}
		})
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
	bad := reframe(buildBatch([]rec{{key: []byte("a"), value: []byte("2"), ts: 20}}), codecGzip, bytes.Repeat([]byte{0x5a}, 30))
	setBaseOffset(bad, 1)
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
