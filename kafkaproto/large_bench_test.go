package kafkaproto

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The requests of issue 19's kill -9 burst at 300,000 partitions, through
// the request path alone (conn.handle on an in-memory connection, as
// BenchmarkHandle): a survivor answered follower fetches of ~100,000
// partitions with news in each and produce requests of ~190,000
// partitions, and read their frames; what these allocate is what its
// collector then had to clean up (10-18 % of its CPU).

// BenchmarkLargeFollowerFetch is one incremental fetch of a follower's
// session of 100,000 partitions (100 topics of 1,000) after one record was
// appended to each (outside the timer): the request names every
// partition's new position and the answer carries every partition, its
// record and new high watermark.
func BenchmarkLargeFollowerFetch(b *testing.B) {
	const topics, per = 100, 1000
	mb := newMemBroker()
	for i := range topics {
		mustCreate(b, mb, fmt.Sprintf("f%02d", i), per)
	}
	s := NewServer(mb, Options{Logger: slog.New(slog.DiscardHandler)})
	defer s.Close()
	nc := &captureConn{}
	c := &conn{s: s, nc: nc}
	c.state.door, c.state.peerID = peerDoor, 2
	defer c.state.endSession()
	request := func(id, epoch int32, offset int64) []byte {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.ReplicaID, req.SessionID, req.SessionEpoch = 12, 2, id, epoch
		req.MaxBytes, req.MinBytes, req.MaxWaitMillis = 64<<20, 1, 0
		for i := range topics {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = fmt.Sprintf("f%02d", i)
			rt.Partitions = make([]kmsg.FetchRequestTopicPartition, per)
			for p := range rt.Partitions {
				rp := &rt.Partitions[p]
				*rp = kmsg.NewFetchRequestTopicPartition()
				rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = int32(p), offset, 1<<20
			}
			req.Topics = append(req.Topics, rt)
		}
		return testFormatter.AppendRequest(nil, req, epoch)[4:]
	}
	if err := c.handle(request(0, 0, 0)); err != nil { // opens the session
		b.Fatal(err)
	}
	id := int32(binary.BigEndian.Uint32(nc.out.Bytes()[4+4+1+4+2:])) // size, correlation id, header tags, throttle, error code
	if c.state.session == nil || c.state.session.id != id {
		b.Fatalf("no session opened (answer names %d)", id)
	}
	record := testBatch(1, -1, -1)
	b.ReportAllocs()
	for epoch := int32(1); b.Loop(); epoch++ {
		b.StopTimer()
		for i := range topics {
			for p := range int32(per) {
				if _, err := mb.Produce(context.Background(), fmt.Sprintf("f%02d", i), p, record, 1); err != nil {
					b.Fatal(err)
				}
			}
		}
		frame := request(id, epoch, int64(epoch-1))
		nc.out.Reset()
		b.StartTimer()
		if err := c.handle(frame); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		// Every partition is answered with its record.
		if n := nc.out.Len(); n < topics*per*len(record) {
			b.Fatalf("answer of %d bytes, want every partition's record", n)
		}
		b.StartTimer()
	}
}

// BenchmarkLargeProduce is one acks=1 Produce request (v9) of one record
// for each of 100,000 partitions, answered whole.
func BenchmarkLargeProduce(b *testing.B) {
	const topics, per = 100, 1000
	mb := newMemBroker()
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 9, 1, 600_000
	record := testBatch(1, -1, -1)
	for i := range topics {
		mustCreate(b, mb, fmt.Sprintf("p%02d", i), per)
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = fmt.Sprintf("p%02d", i)
		for p := range int32(per) {
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition, rp.Records = p, record
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	frame := testFormatter.AppendRequest(nil, req, 1)[4:]
	s := NewServer(mb, Options{Logger: slog.New(slog.DiscardHandler)})
	defer s.Close()
	nc := &captureConn{}
	c := &conn{s: s, nc: nc}
	b.ReportAllocs()
	for b.Loop() {
		nc.out.Reset()
		if err := c.handle(frame); err != nil {
			b.Fatal(err)
		}
	}
	if nc.out.Len() < topics*per*30 {
		b.Fatalf("answer of %d bytes for %d partitions", nc.out.Len(), topics*per)
	}
}

// BenchmarkReadFrame reads one request frame of each size from the
// connection (a Produce frame: the only API allowed more than 1 MiB).
func BenchmarkReadFrame(b *testing.B) {
	for _, size := range []int{100 << 10, 15 << 20} {
		b.Run(fmt.Sprintf("bytes=%d", size), func(b *testing.B) {
			frame := make([]byte, 4+size)
			binary.BigEndian.PutUint32(frame, uint32(size))
			binary.BigEndian.PutUint16(frame[4:], produceKey)
			s := NewServer(newMemBroker(), Options{Logger: slog.New(slog.DiscardHandler), MaxRequestSize: 64 << 20})
			defer s.Close()
			nc := &readConn{}
			c := &conn{s: s, nc: nc}
			c.br = bufio.NewReaderSize(nc, readChunk)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				nc.r.Reset(frame)
				got, err := c.readFrame()
				if err != nil || len(got) != size {
					b.Fatalf("read %d bytes, %v", len(got), err)
				}
				if cap(c.in) > keepBuffer { // as serveConn did after each request (a frame over keepBuffer has its own array since)
					c.in = nil
				}
			}
		})
	}
}

// readConn is a connection that reads from r.
type readConn struct {
	net.Conn
	r bytes.Reader
}

func (c *readConn) Read(b []byte) (int, error)      { return c.r.Read(b) }
func (c *readConn) SetReadDeadline(time.Time) error { return nil }
