package kafkaconn

import (
	"bytes"
	"unsafe"

	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/runnel/runnel/internal/alloctest"
	"io"
	"math/rand/v2"
	"net"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// randomFetchResponse is a Fetch v12 answer with what a leader may put in
// one: topics of several partitions, errors, records or none, aborted
// transactions (none, an empty list, some) and the tagged fields of v12.
func randomFetchResponse(rng *rand.Rand) *kmsg.FetchResponse {
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(12)
	resp.ThrottleMillis, resp.ErrorCode, resp.SessionID = rng.Int32N(100), int16(rng.IntN(2)), rng.Int32()
	for ti := range rng.IntN(5) {
		t := kmsg.NewFetchResponseTopic()
		t.Topic = fmt.Sprintf("topic-%d", (ti+rng.IntN(3))%4)
		for i := range rng.IntN(40) {
			p := kmsg.NewFetchResponseTopicPartition()
			p.Partition, p.ErrorCode = int32(i), int16(rng.IntN(3))
			p.HighWatermark, p.LastStableOffset, p.LogStartOffset = rng.Int64N(1<<40), rng.Int64N(1<<40), rng.Int64N(1<<40)
			switch rng.IntN(4) {
			case 0:
				p.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
			case 1:
				for range 1 + rng.IntN(3) {
					at := kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
					at.ProducerID, at.FirstOffset = rng.Int64(), rng.Int64N(1<<40)
					p.AbortedTransactions = append(p.AbortedTransactions, at)
				}
			}
			p.PreferredReadReplica = rng.Int32N(3) - 1
			if rng.IntN(3) > 0 {
				p.RecordBatches = make([]byte, rng.IntN(300))
				for j := range p.RecordBatches {
					p.RecordBatches[j] = byte(rng.Uint32())
				}
			}
			if rng.IntN(4) == 0 {
				p.DivergingEpoch.Epoch, p.DivergingEpoch.EndOffset = rng.Int32N(9), rng.Int64N(1000)
			}
			if rng.IntN(4) == 0 {
				p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = rng.Int32N(9), rng.Int32N(9)
			}
			if rng.IntN(6) == 0 {
				p.SnapshotID.EndOffset, p.SnapshotID.Epoch = rng.Int64N(1000), rng.Int32N(9)
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

// emptyIsNil makes resp's empty lists of topics, partitions and bytes
// nil: the same to a reader (aborted transactions are compared as they
// are: none and an empty list differ on the wire).
func emptyIsNil(resp *kmsg.FetchResponse) {
	if len(resp.Topics) == 0 {
		resp.Topics = nil
	}
	for i := range resp.Topics {
		t := &resp.Topics[i]
		if len(t.Partitions) == 0 {
			t.Partitions = nil
		}
		t.Partitions = append([]kmsg.FetchResponseTopicPartition(nil), t.Partitions...)
		for j := range t.Partitions {
			if p := &t.Partitions[j]; len(p.RecordBatches) == 0 {
				p.RecordBatches = nil
			}
		}
	}
}

// answerFetches answers each request read from conn with the next of
// resps, framed as a broker frames it.
func answerFetches(conn net.Conn, resps []*kmsg.FetchResponse) {
	defer conn.Close()
	for _, resp := range resps {
		var size [4]byte
		if _, err := io.ReadFull(conn, size[:]); err != nil {
			return
		}
		req := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(conn, req); err != nil {
			return
		}
		frame := append([]byte{0, 0, 0, 0}, req[4:8]...) // correlation id
		frame = append(frame, 0)                         // no header tags
		frame = resp.AppendTo(frame)
		binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
		if _, err := conn.Write(frame); err != nil {
			return
		}
	}
}

// Fetch decodes a v12 answer as kmsg does, answer after answer into the
// same FetchAnswer, whatever the one before held (more or fewer topics
// and partitions, records, aborted transactions, tags).
func TestFetchDecodesAsKmsg(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var resps []*kmsg.FetchResponse
	for range 200 {
		resps = append(resps, randomFetchResponse(rng))
	}
	client, server := net.Pipe()
	go answerFetches(server, resps)
	c := New(client, "test")
	defer c.Close()
	c.Watch(context.Background())
	var a FetchAnswer
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	for i, want := range resps {
		if err := c.Fetch(time.Minute, req, &a); err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		ref := kmsg.NewPtrFetchResponse()
		ref.SetVersion(12)
		if err := ref.ReadFrom(want.AppendTo(nil)); err != nil {
			t.Fatal(err)
		}
		got := a.Resp
		got.Topics = append([]kmsg.FetchResponseTopic(nil), got.Topics...)
		emptyIsNil(&got)
		emptyIsNil(ref)
		if !reflect.DeepEqual(&got, ref) {
			t.Fatalf("answer %d decoded\n%+v\nkmsg decodes\n%+v", i, a.Resp, *ref)
		}
	}
}

// Decoding an answer into a FetchAnswer that held one as large before
// allocates nothing; a truncated answer is refused.
func TestFetchAnswerReusesItsMemory(t *testing.T) {
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(12)
	for ti := range 3 {
		t := kmsg.NewFetchResponseTopic()
		t.Topic = fmt.Sprintf("scale-%05d", ti)
		for i := range 1000 {
			p := kmsg.NewFetchResponseTopicPartition()
			p.Partition, p.HighWatermark, p.RecordBatches = int32(i), 5, []byte("a record batch")
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	body := resp.AppendTo(nil)
	var a FetchAnswer
	if err := a.decode(body); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(10, func() {
		if err := a.decode(body); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("decoding 3,000 partitions again allocates %v times, want 0", n)
	}
	for _, cut := range []int{1, 11, 40, len(body) / 2, len(body) - 1} {
		if err := a.decode(body[:cut]); err == nil {
			t.Fatalf("an answer cut at %d of %d bytes decodes", cut, len(body))
		}
	}
}

// The end of the context a connection watches ends a Fetch waiting for
// its answer at once, and fails every later one.
func TestFetchEndsWithTheWatchedContext(t *testing.T) {
	c := silentPeer(t)
	ctx, cancel := context.WithCancel(context.Background())
	c.Watch(ctx)
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	done := make(chan error, 1)
	var a FetchAnswer
	go func() { done <- c.Fetch(time.Hour, req, &a) }()
	time.Sleep(10 * time.Millisecond) // most likely waiting for the answer by now
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Fetch after the watched context ended: %v, want context.Canceled", err)
	}
	if err := c.Fetch(time.Hour, req, &a); !errors.Is(err, context.Canceled) {
		t.Fatalf("a later Fetch: %v, want context.Canceled", err)
	}
}

// FuzzFetchAnswerDecode: the Fetch v12 decoder reads a leader's bytes,
// which a follower cannot trust to be well formed: any input is decoded
// or refused without a panic, within what its length allows (every
// partition takes at least 37 bytes, and a partition's struct is larger
// than that: the extra bound is those structs, twice for the array's
// growth); and what it accepts, kmsg reads the same, field by field.
func FuzzFetchAnswerDecode(f *testing.F) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 8 {
		f.Add(randomFetchResponse(rng).AppendTo(nil))
	}
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f})
	partSize := int(unsafe.Sizeof(kmsg.FetchResponseTopicPartition{}))
	f.Fuzz(func(t *testing.T, body []byte) {
		var a FetchAnswer
		var err error
		extra := 2 * (len(body)/37 + 1) * partSize
		if n := alloctest.Bytes(func() { err = a.decode(body) }); n > alloctest.Limit(len(body), extra) {
			t.Fatalf("decode allocated %d bytes for %d", n, len(body))
		}
		if err != nil {
			return
		}
		ref := kmsg.NewPtrFetchResponse()
		ref.SetVersion(12)
		if err := ref.ReadFrom(body); err != nil {
			t.Fatalf("decoded what kmsg refuses (%v)", err)
		}
		got := &a.Resp
		if len(got.Topics) != len(ref.Topics) || got.ThrottleMillis != ref.ThrottleMillis || got.ErrorCode != ref.ErrorCode || got.SessionID != ref.SessionID {
			t.Fatalf("response %+v, kmsg %+v", got, ref)
		}
		for i := range got.Topics {
			gt, rt := &got.Topics[i], &ref.Topics[i]
			if gt.Topic != rt.Topic || len(gt.Partitions) != len(rt.Partitions) {
				t.Fatalf("topic %d: %q of %d partitions, kmsg %q of %d", i, gt.Topic, len(gt.Partitions), rt.Topic, len(rt.Partitions))
			}
			for j := range gt.Partitions {
				gp, rp := gt.Partitions[j], rt.Partitions[j]
				if gp.Partition != rp.Partition || gp.ErrorCode != rp.ErrorCode || gp.HighWatermark != rp.HighWatermark ||
					gp.LastStableOffset != rp.LastStableOffset || gp.LogStartOffset != rp.LogStartOffset ||
					gp.PreferredReadReplica != rp.PreferredReadReplica || !bytes.Equal(gp.RecordBatches, rp.RecordBatches) ||
					(gp.AbortedTransactions == nil) != (rp.AbortedTransactions == nil) || len(gp.AbortedTransactions) != len(rp.AbortedTransactions) {
					t.Fatalf("topic %d partition %d: %+v, kmsg %+v", i, j, gp, rp)
				}
				for k := range gp.AbortedTransactions {
					if ga, ra := gp.AbortedTransactions[k], rp.AbortedTransactions[k]; ga.ProducerID != ra.ProducerID || ga.FirstOffset != ra.FirstOffset {
						t.Fatalf("topic %d partition %d aborted %d: %+v, kmsg %+v", i, j, k, ga, ra)
					}
				}
			}
		}
	})
}
