package broker

import (
	"fmt"
	"testing"
	"time"

	"github.com/runnel/runnel/recordbatch"
	"github.com/runnel/runnel/segments"
)

// BenchmarkNewLeaderFirstWrite times the first idempotent write of a
// replica that has just become leader, two ways under the same load,
// alternated partition by partition: with the producer table it kept as a
// follower ("kept", issue 19) and with the table rebuilt from its log
// first ("rebuilt": what every new leader did before, a follower dropping
// its table on each append). 100 partitions, each holding 50 batches of 5
// producers copied from a leader; the log is in the page cache, so the
// rebuild is at its cheapest here. It reports the time per write of each
// and their ratio.
func BenchmarkNewLeaderFirstWrite(b *testing.B) {
	const parts, batches, producersPer = 100, 50, 5
	now := time.Now().UnixMilli()
	type replica struct {
		p   *Partition
		seq map[int64]int32
	}
	var rs []replica
	for i := range parts {
		log, err := segments.Open(b.TempDir(), segments.DefaultConfig(), segments.Options{})
		if err != nil {
			b.Fatal(err)
		}
		p := newPartition("t", int32(i), [16]byte{1}, log, nil)
		defer p.close()
		setLeader(p, 1, 0)
		r := replica{p: p, seq: map[int64]int32{}}
		var data []byte
		for j := range batches {
			pid := int64(1 + j%producersPer)
			raw := recordbatch.Build([]recordbatch.NewRecord{{Timestamp: now, Value: fmt.Appendf(nil, "v%d", j)}})
			recordbatch.SetProducer(raw, pid, 0, r.seq[pid])
			recordbatch.SetBaseOffset(raw, int64(j))
			r.seq[pid]++
			data = append(data, raw...)
		}
		if err := p.appendAsFollower(data, 0); err != nil {
			b.Fatal(err)
		}
		rs = append(rs, r)
	}
	var kept, rebuilt time.Duration
	writes := 0
	epoch := int32(0)
	for b.Loop() {
		for i, r := range rs {
			epoch++
			setLeader(r.p, 0, epoch)
			r.p.repl.isr = []int32{0}
			rebuild := (i+writes)%2 == 0 // alternate which partitions rebuild
			if rebuild {
				r.p.appendMu.Lock()
				r.p.producers.Reset()
				r.p.appendMu.Unlock()
			}
			pid := int64(1 + writes%producersPer)
			raw := recordbatch.Build([]recordbatch.NewRecord{{Timestamp: now, Value: []byte("next")}})
			recordbatch.SetProducer(raw, pid, 0, r.seq[pid])
			start := time.Now()
			if _, err := r.p.append(raw); err != nil {
				b.Fatal(err)
			}
			took := time.Since(start)
			r.seq[pid]++
			if rebuild {
				rebuilt += took
			} else {
				kept += took
			}
			setLeader(r.p, 1, epoch) // back to following, for the next round
		}
		writes++
	}
	half := float64(writes * parts / 2)
	b.ReportMetric(float64(kept.Nanoseconds())/half, "kept-ns/write")
	b.ReportMetric(float64(rebuilt.Nanoseconds())/half, "rebuilt-ns/write")
	b.ReportMetric(float64(rebuilt)/float64(kept), "rebuilt/kept")
}
