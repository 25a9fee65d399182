package broker

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"os"
	"sync/atomic"
	"testing"

	"github.com/runnel/runnel/recordbatch"
	"github.com/runnel/runnel/server/broker/kafkaconn"
)

// BenchmarkFollowerRound is a follower's side of one record written to
// every partition it follows from one leader (issue 19: the burst a
// survivor replays after a kill -9): the leader's session answers every
// partition with one new batch, the follower decodes the answer and
// applies each partition on its pool, then lists every new position in
// the requests that follow (a request holds ~20,000), until the leader's
// session holds them all at the new end. 10,000 partitions, 100,000 with
// RUNNEL_BENCH=1; the logs live in memory. The leader (batchLeader)
// parses and writes the wire by hand into buffers it reuses, so what is
// allocated per op is the follower's, and its logs'.
func BenchmarkFollowerRound(b *testing.B) {
	n := 10_000
	if os.Getenv("RUNNEL_BENCH") == "1" {
		n = 100_000
	}
	f, _, _ := idleFollower(b, n)
	l := newBatchLeader(n)
	client, server := net.Pipe()
	go l.serve(server)
	b.Cleanup(func() { client.Close() })
	conn := kafkaconn.New(client, "bench-follower")
	catchUp := func() {
		for rounds := 0; l.behind.Load() > 0; rounds++ {
			if rounds == 1000 {
				b.Fatalf("%d partitions behind after %d rounds", l.behind.Load(), rounds)
			}
			if err := f.round(conn); err != nil {
				b.Fatal(err)
			}
		}
	}
	catchUp() // the session opens and holds every partition
	l.write() // the first records of each log (its first segment written)
	catchUp()
	requests := f.m.stats.requests.Load()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		l.write()
		catchUp()
	}
	b.StopTimer()
	b.ReportMetric(float64(f.m.stats.requests.Load()-requests)/float64(b.N), "requests/op")
	b.ReportMetric(float64(n), "partitions")
}

// batchLeader is a leader's fetch session over n partitions of topic "t"
// (Fetch v12 only, session 7): it holds each partition at the position a
// request last listed (none: not held) and answers every held partition
// behind its end with one batch at that position. It writes its end on
// every partition at once (write).
type batchLeader struct {
	n      int
	held   []int64 // by index; -1 not held
	end    atomic.Int64
	behind atomic.Int64 // partitions not held at end
	batch  []byte
}

func newBatchLeader(n int) *batchLeader {
	l := &batchLeader{n: n, held: make([]int64, n),
		batch: recordbatch.Build([]recordbatch.NewRecord{{Value: []byte("x"), Timestamp: 1}})}
	for i := range l.held {
		l.held[i] = -1
	}
	binary.BigEndian.PutUint32(l.batch[12:], 1) // partition leader epoch (outside the CRC)
	l.behind.Store(int64(n))
	return l
}

// write appends one record to every partition.
func (l *batchLeader) write() {
	l.end.Add(1)
	l.behind.Store(int64(l.n))
}

type wireReader struct {
	b   []byte
	bad bool
}

func (r *wireReader) int16() int16 { return int16(r.fixed(2)) }
func (r *wireReader) int32() int32 { return int32(r.fixed(4)) }
func (r *wireReader) int64() int64 { return int64(r.fixed(8)) }
func (r *wireReader) fixed(n int) uint64 {
	if len(r.b) < n {
		r.bad, r.b = true, nil
		return 0
	}
	var v uint64
	for _, c := range r.b[:n] {
		v = v<<8 | uint64(c)
	}
	r.b = r.b[n:]
	return v
}
func (r *wireReader) uvarint() int {
	v, k := binary.Uvarint(r.b)
	if k <= 0 {
		r.bad, r.b = true, nil
		return 0
	}
	r.b = r.b[k:]
	return int(v)
}
func (r *wireReader) skip(n int) []byte {
	if n < 0 || len(r.b) < n {
		r.bad, r.b = true, nil
		return nil
	}
	s := r.b[:n]
	r.b = r.b[n:]
	return s
}
func (r *wireReader) tags() {
	for range r.uvarint() {
		r.uvarint()
		r.skip(r.uvarint())
	}
}

func (l *batchLeader) serve(conn net.Conn) {
	defer conn.Close()
	br := bufio.NewReaderSize(conn, 64<<10)
	var body, out []byte
	for {
		var size [4]byte
		if _, err := io.ReadFull(br, size[:]); err != nil {
			return
		}
		body = append(body[:0], make([]byte, binary.BigEndian.Uint32(size[:]))...)
		if _, err := io.ReadFull(br, body); err != nil {
			return
		}
		r := wireReader{b: body}
		if key, version := r.int16(), r.int16(); key != 1 || version != 12 {
			return
		}
		corr := r.int32()
		r.skip(int(r.int16())) // client id
		r.tags()
		r.skip(4 * 4) // replica, max wait, min bytes, max bytes
		r.skip(1)     // isolation level
		r.int32()     // session id
		epoch := r.int32()
		if epoch == 0 {
			for i := range l.held {
				l.held[i] = -1
			}
		}
		for range r.uvarint() - 1 {
			r.skip(r.uvarint() - 1) // topic: always "t"
			for range r.uvarint() - 1 {
				i := r.int32()
				r.int32() // current leader epoch
				off := r.int64()
				r.skip(4 + 8 + 4) // last fetched epoch, log start, max bytes
				r.tags()
				l.held[i] = off
			}
			r.tags()
		}
		for range r.uvarint() - 1 { // forgotten
			r.skip(r.uvarint() - 1)
			for range r.uvarint() - 1 {
				l.held[r.int32()] = -1
			}
			r.tags()
		}
		if r.bad {
			return
		}
		end, behind, answered := l.end.Load(), int64(0), 0
		for _, at := range l.held {
			switch {
			case at < 0 || at > end:
				behind++
			case at < end:
				behind++
				answered++
			}
		}
		l.behind.Store(behind)

		out = binary.BigEndian.AppendUint32(out[:0], 0) // size, below
		out = binary.BigEndian.AppendUint32(out, uint32(corr))
		out = append(out, 0)                        // header tags
		out = binary.BigEndian.AppendUint32(out, 0) // throttle
		out = binary.BigEndian.AppendUint16(out, 0) // error
		out = binary.BigEndian.AppendUint32(out, 7) // session id
		if answered == 0 {
			out = append(out, 1) // no topics
		} else {
			out = append(out, 2, 2, 't') // one topic, "t"
			out = binary.AppendUvarint(out, uint64(answered+1))
			for i, at := range l.held {
				if at < 0 || at >= end {
					continue
				}
				out = binary.BigEndian.AppendUint32(out, uint32(i))
				out = binary.BigEndian.AppendUint16(out, 0)           // error
				out = binary.BigEndian.AppendUint64(out, uint64(end)) // high watermark
				out = binary.BigEndian.AppendUint64(out, uint64(end)) // last stable offset
				out = binary.BigEndian.AppendUint64(out, 0)           // log start
				out = append(out, 1)                                  // no aborted transactions
				out = binary.BigEndian.AppendUint32(out, 0xffffffff)  // preferred read replica -1
				out = binary.AppendUvarint(out, uint64(len(l.batch)+1))
				k := len(out)
				out = append(out, l.batch...)
				binary.BigEndian.PutUint64(out[k:], uint64(at)) // base offset (outside the CRC)
				out = append(out, 0)                            // partition tags
			}
			out = append(out, 0) // topic tags
		}
		out = append(out, 0) // response tags
		binary.BigEndian.PutUint32(out, uint32(len(out)-4))
		if _, err := conn.Write(out); err != nil {
			return
		}
	}
}
