package recordbatch

import (
	"reflect"
	"testing"
	"time"
)

// DecodeNext decodes what Decode decodes, for plain and
// compressed batches, and refuses bytes that are not the batch Next
// described.
func TestDecodeNextBatch(t *testing.T) {
	plain := valueBatch(20, 100, 3)
	for _, b := range [][]byte{plain, withCodec(t, plain, CodecZstd, false), withCodec(t, plain, CodecLZ4, false)} {
		info, ok, err := Next(b)
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		want := decodeAll(t, func() (*Records, error) { return Decode(b, 1<<20) })
		got := decodeAll(t, func() (*Records, error) { return DecodeNext(b[:info.Size], info, 1<<20) })
		if len(got) != 20 || !reflect.DeepEqual(got, want) {
			t.Fatalf("got %d records %+v, want %+v", len(got), got, want)
		}
		if _, err := DecodeNext(b[:info.Size-1], info, 1<<20); err == nil {
			t.Fatal("a short batch was decoded")
		}
		other := info
		other.BaseOffset++
		if _, err := DecodeNext(b[:info.Size], other, 1<<20); err == nil {
			t.Fatal("a batch other than the one described was decoded")
		}
	}
}

func decodeAll(t *testing.T, open func() (*Records, error)) []Record {
	t.Helper()
	it, err := open()
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var out []Record
	var r Record
	for it.Next(&r) {
		out = append(out, r)
	}
	if it.Err() != nil {
		t.Fatal(it.Err())
	}
	return out
}

// BenchmarkDecodeView reads every record of a 1,000-record batch of 1 KiB
// values the way an HTTP JSON consume does (DecodeNext, NextView),
// snappy-compressed (franz-go's default codec) and zstd (a frame of more
// than 1 MiB: streamed), against the same batch uncompressed in the same
// iteration: the time ratios (snappy_vs_plain, zstd_vs_plain) and the
// allocations of each read.
func BenchmarkDecodeView(b *testing.B) {
	plain := valueBatch(1000, 1024, 1)
	batches := map[string][]byte{"plain": plain, "snappy": withCodec(b, plain, CodecSnappy, false), "zstd": withCodec(b, plain, CodecZstd, false)}
	read := func(batch []byte) {
		info, _, err := Next(batch)
		if err != nil {
			b.Fatal(err)
		}
		it, err := DecodeNext(batch, info, 1<<20)
		if err != nil {
			b.Fatal(err)
		}
		var r Record
		n := 0
		for it.NextView(&r) {
			n++
		}
		it.Close()
		if n != 1000 {
			b.Fatal(n, it.Err())
		}
	}
	times := map[string]time.Duration{}
	allocs := map[string]float64{}
	for b.Loop() {
		for name, batch := range batches {
			start := time.Now()
			allocs[name] += testing.AllocsPerRun(1, func() { read(batch) })
			times[name] += time.Since(start)
		}
	}
	for _, name := range []string{"snappy", "zstd"} {
		b.ReportMetric(times[name].Seconds()/times["plain"].Seconds(), name+"_vs_plain")
	}
	for name := range batches {
		b.ReportMetric(allocs[name]/float64(b.N), name+"_allocs/read")
	}
}
