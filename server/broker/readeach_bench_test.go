package broker

import (
	"testing"
	"time"

	"github.com/runnel/runnel/segments"
	"github.com/runnel/runnel/server/broker/readbuf"

	"github.com/runnel/runnel/recordbatch"
)

// BenchmarkReadDecodedEach reads 1,000 records of 1 KiB per iteration
// both ways under the same load: collected into a []Record (key and value
// copied per record, the old HTTP JSON consume read) and handed to a
// callback straight from the decoded batch (the streaming read). It
// reports the ratio of their times and the allocations of each.
func BenchmarkReadDecodedEach(b *testing.B) {
	log, err := segments.Open(b.TempDir(), segments.DefaultConfig(), segments.Options{})
	if err != nil {
		b.Fatal(err)
	}
	p := newPartition("t", 0, [16]byte{1}, log, nil)
	p.readBufs = new(readbuf.Pool) // as the broker gives every partition
	defer p.close()
	p.repl.isr = []int32{0}
	setLeader(p, 0, 1)
	recs := make([]recordbatch.NewRecord, 500)
	for i := range recs {
		recs[i] = recordbatch.NewRecord{Key: []byte("key"), Value: make([]byte, 1024), Timestamp: time.Now().UnixMilli()}
	}
	for range 2 {
		if _, err := p.append(recordbatch.Build(recs)); err != nil {
			b.Fatal(err)
		}
	}
	p.hwm.Store(p.log().EndOffset())
	n := 0
	emit := func(r *recordbatch.Record, _ bool, _ *recordbatch.Marker) error { n += len(r.Value); return nil }
	var collect, stream time.Duration
	var collectAllocs, streamAllocs float64
	for b.Loop() {
		start := time.Now()
		collectAllocs += testing.AllocsPerRun(1, func() {
			if res, err := p.ReadDecoded(0, 1000, 4<<20, false); err != nil || len(res.Records) != 1000 {
				b.Fatal(err, len(res.Records))
			}
		})
		collect += time.Since(start)
		start = time.Now()
		streamAllocs += testing.AllocsPerRun(1, func() {
			if res, err := p.readDecodedEach(0, 1000, 4<<20, false, false, emit); err != nil || res.Count != 1000 {
				b.Fatal(err, res.Count)
			}
		})
		stream += time.Since(start)
	}
	b.ReportMetric(collect.Seconds()/stream.Seconds(), "speedup_vs_collect")
	b.ReportMetric(collectAllocs/float64(b.N), "collect_allocs/op")
	b.ReportMetric(streamAllocs/float64(b.N), "stream_allocs/op")
}
