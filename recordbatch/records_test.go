package recordbatch

import (
	"bytes"
	"errors"
	"fmt"
	"runtime/debug"
	"testing"

	"github.com/runnel/runnel/internal/alloctest"
)

func TestDecodeBatchStopsEarly(t *testing.T) {
	b := withCodec(t, buildBatch([]rec{{key: []byte("k"), value: []byte("v1"), ts: 5}, {key: nil, value: nil, ts: 6}}), CodecLZ4, false)
	it, err := Decode(b, 1<<20)
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
	big := bombBatch(t, CodecZstd, 4000, 4<<10) // 16 MB inflated
	// Pooled decoders are dropped at a GC (and, under -race, sync.Pool
	// drops a quarter of what is put back), and a fresh zstd decoder
	// allocates its window. So: warm the pool up, keep the GC out, and
	// take the cheapest of 5 reads, which reuses a decoder unless all 5
	// missed the pool. Inflating the batch would cost 16 MB every time.
	if it, err := Decode(big, 1<<20); err == nil {
		it.Next(&r)
		it.Close()
	}
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	cheapest := uint64(1 << 62)
	for range 5 {
		cheapest = min(cheapest, alloctest.Bytes(func() {
			it, _ := Decode(big, 1<<20)
			it.Next(&r)
			it.Close()
		}))
	}
	t.Logf("cheapest read: %d bytes", cheapest)
	if cheapest > 4<<20 {
		t.Fatalf("the cheapest of 5 one-record reads of a 16 MB batch allocated %d bytes", cheapest)
	}

	// A record larger than the reader's bound is refused, not inflated.
	it, err = Decode(bombBatch(t, CodecGzip, 1, 2<<20), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if it.Next(&r) || !errors.Is(it.Err(), ErrInflatedTooLarge) {
		t.Fatalf("2 MiB record with a 1 MiB bound: %v", it.Err())
	}
	it.Close()
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
	for codec := CodecNone; codec <= CodecZstd; codec++ {
		batch := plain
		if codec != CodecNone {
			batch = withCodec(b, plain, codec, false)
		}
		h, err := Check(batch, 0, CountExact)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("codec=%d", codec), func(b *testing.B) {
			b.SetBytes(int64(len(plain)))
			b.ReportAllocs()
			for range b.N {
				if err := ValidateRecords(h, batch, Rules{ExactOffsets: true, MaxInflated: 1 << 25}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// An uncompressed batch is validated without allocating: the leader
// validates every batch it appends, one per partition of a produce request
// of 100,000 partitions (issue 19).
func TestValidateUncompressedAllocatesNothing(t *testing.T) {
	batch := Build([]NewRecord{{Key: []byte("k"), Value: []byte("v1"), Timestamp: 1}, {Value: []byte("v2"), Timestamp: 2}})
	h, err := Check(batch, 0, CountExact)
	if err != nil {
		t.Fatal(err)
	}
	rules := Rules{ExactOffsets: true, MaxInflated: 1 << 20}
	var verr error
	if allocs := testing.AllocsPerRun(100, func() { verr = ValidateRecords(h, batch, rules) }); allocs != 0 || verr != nil {
		t.Fatalf("validating an uncompressed batch: %v allocations, error %v; want none", allocs, verr)
	}
}
