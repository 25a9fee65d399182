package broker

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/runnel/runnel/segments"

	"github.com/runnel/runnel/recordbatch"
)

// BenchmarkReadIsolation reads a partition of 1,000 transactions (10
// records each, one in ten aborted) through the HTTP read path, whole, at
// both isolation levels in each iteration: read_committed adds the last
// stable offset, the aborted-transactions lookup and the per-batch filter,
// and decodes no aborted record. It reports the ratio of the two.
func BenchmarkReadIsolation(b *testing.B) {
	log, err := segments.Open(b.TempDir(), segments.DefaultConfig(), segments.Options{})
	if err != nil {
		b.Fatal(err)
	}
	p := newPartition("t", 0, [16]byte{1}, log, nil)
	defer p.close()
	p.repl.isr = []int32{0}
	setLeader(p, 0, 1)
	recs := make([]recordbatch.NewRecord, 10)
	for i := range recs {
		recs[i] = recordbatch.NewRecord{Value: make([]byte, 100), Timestamp: time.Now().UnixMilli()}
	}
	for txn := range 1000 {
		raw := recordbatch.Build(recs)
		raw[recordbatch.AttrAt+1] |= recordbatch.AttrTransactional
		binary.BigEndian.PutUint64(raw[43:], uint64(txn%50))
		binary.BigEndian.PutUint16(raw[51:], 0)
		binary.BigEndian.PutUint32(raw[53:], uint32(txn/50*10))
		recordbatch.SetCRC(raw)
		if _, err := p.append(raw); err != nil {
			b.Fatal(err)
		}
		typ := recordbatch.ControlCommit
		if txn%10 == 0 {
			typ = recordbatch.ControlAbort
		}
		_, wait, err := p.appendMarker(recordbatch.Marker{ProducerID: int64(txn % 50), Type: typ})
		if err == nil {
			err = wait(context.Background())
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	readAll := func(committed bool, want int) time.Duration {
		start := time.Now()
		n := 0
		for off := int64(0); off < p.hwm.Load(); {
			res, err := p.ReadDecoded(off, 1000, 1<<20, committed)
			if err != nil {
				b.Fatal(err)
			}
			n += len(res.Records)
			off = res.Next
		}
		if n != want {
			b.Fatalf("read %d records, want %d", n, want)
		}
		return time.Since(start)
	}
	// Both levels in every iteration, alternating which goes first, so
	// the ratio is measured under the same load.
	var uncommitted, committed time.Duration
	i := 0
	for b.Loop() {
		if i%2 == 0 {
			uncommitted += readAll(false, 10000)
			committed += readAll(true, 9000)
		} else {
			committed += readAll(true, 9000)
			uncommitted += readAll(false, 10000)
		}
		i++
	}
	b.ReportMetric(float64(uncommitted.Nanoseconds())/float64(i), "uncommitted-ns/read")
	b.ReportMetric(float64(committed.Nanoseconds())/float64(i), "committed-ns/read")
	b.ReportMetric(float64(committed)/float64(uncommitted), "committed/uncommitted")
}
