package kafkaproto

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFetchWriterMatchesKmsg: the spliced Fetch encoding equals kmsg's
// encoding of the same response, for every served version, with small
// (inlined) and large (separately written) chunks, errors and empty
// partitions, aborted transactions (read_committed) or none.
func TestFetchWriterMatchesKmsg(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var open countingInt
	for v := int16(fetchMin); v <= fetchMax; v++ {
		for round := range 4 {
			t.Run(fmt.Sprintf("v%d/%d", v, round), func(t *testing.T) {
				req := kmsg.NewPtrFetchRequest()
				req.Version = v
				for ti := range 1 + rng.IntN(3) {
					rt := kmsg.NewFetchRequestTopic()
					rt.Topic = fmt.Sprintf("topic-%d-%d", ti, rng.IntN(1000))
					binary.BigEndian.PutUint64(rt.TopicID[:8], rng.Uint64()) // sent from v13
					binary.BigEndian.PutUint64(rt.TopicID[8:], rng.Uint64())
					for pi := range 1 + rng.IntN(4) {
						rp := kmsg.NewFetchRequestTopicPartition()
						rp.Partition = int32(pi)
						rt.Partitions = append(rt.Partitions, rp)
					}
					req.Topics = append(req.Topics, rt)
				}
				fr := newFetchReply(req)
				fr.ThrottleMillis, fr.ErrorCode, fr.SessionID = 3, 0, 0
				for i := range fr.topics {
					for j := range fr.topics[i].parts {
						p := &fr.topics[i].parts[j]
						p.hw, p.lso, p.logStart = rng.Int64N(1<<40), rng.Int64N(1<<40), rng.Int64N(100)
						if rng.IntN(2) == 0 { // read_committed: an array, maybe empty
							p.aborted = []AbortedTransaction{}
							for range rng.IntN(3) {
								p.aborted = append(p.aborted,
									AbortedTransaction{ProducerID: rng.Int64N(1 << 40), FirstOffset: rng.Int64N(1 << 40)})
							}
						}
						switch rng.IntN(4) {
						case 0: // empty
						case 1:
							p.errCode = kerr.OffsetOutOfRange.Code
						case 2: // inlined
							p.records = newTestChunk(&open, 1+rng.IntN(inlineChunk))
						case 3: // written on its own
							p.records = newTestChunk(&open, inlineChunk+1+rng.IntN(300<<10))
						}
					}
				}
				want := fr.AppendTo(nil)
				var got bytes.Buffer
				prefix := []byte{0, 0, 0, 0, 9, 9, 9, 9}
				if _, err := fr.writeTo(&got, prefix); err != nil {
					t.Fatal(err)
				}
				if size := binary.BigEndian.Uint32(got.Bytes()); int(size) != got.Len()-4 {
					t.Fatalf("size prefix %d, frame %d", size, got.Len()-4)
				}
				if !bytes.Equal(got.Bytes()[8:], want) {
					t.Fatalf("encoding differs from kmsg: got %d bytes, want %d", got.Len()-8, len(want))
				}
				fr.close()
			})
		}
	}
	if open != 0 {
		t.Fatalf("%d chunks left open", open)
	}
}

// TestBuildFetchReplyGroupsByTopic: targets of interleaved topics are
// answered grouped by topic, the topics in the order first read and each
// one's partitions in the order read, as kmsg structs appended one by one
// would hold them; writeTo writes what kmsg encodes, also for an answer of
// 20,000 partitions written in several pieces.
func TestBuildFetchReplyGroupsByTopic(t *testing.T) {
	var open countingInt
	for _, n := range []int{7, 20_000} {
		t.Run(fmt.Sprintf("partitions=%d", n), func(t *testing.T) {
			req := kmsg.NewPtrFetchRequest()
			req.Version = 12
			want := req.ResponseKind().(*kmsg.FetchResponse)
			order := []string{"a", "b", "a", "c", "b", "a", "d"}
			var targets []*fetchTarget
			for i := range n {
				tg := &fetchTarget{topic: order[i%len(order)], partition: int32(i), hw: int64(i), lso: int64(i) - 1, logStart: 3}
				if i%5 == 1 {
					tg.errCode = kerr.NotLeaderForPartition.Code
				}
				if i%4 == 0 {
					tg.aborted = []AbortedTransaction{{ProducerID: int64(i), FirstOffset: 1}}
				}
				rp := kmsg.NewFetchResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = tg.partition, tg.errCode, tg.hw, tg.lso, tg.logStart
				if tg.aborted != nil {
					rp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{{ProducerID: int64(i), FirstOffset: 1}}
				}
				rp.RecordBatches = []byte{}
				if i%3 == 0 {
					c := newTestChunk(&open, 1+i%100)
					tg.records, rp.RecordBatches = c, c.b
				}
				targets = append(targets, tg)
				k := slices.IndexFunc(want.Topics, func(rt kmsg.FetchResponseTopic) bool { return rt.Topic == tg.topic })
				if k < 0 {
					k = len(want.Topics)
					rt := kmsg.NewFetchResponseTopic()
					rt.Topic = tg.topic
					want.Topics = append(want.Topics, rt)
				}
				want.Topics[k].Partitions = append(want.Topics[k].Partitions, rp)
			}
			fr := buildFetchReply(req, nil, targets)
			defer fr.close()
			wantBytes := want.AppendTo(nil)
			if got := fr.AppendTo(nil); !bytes.Equal(got, wantBytes) {
				t.Fatalf("reply encodes as %d bytes, want %d (kmsg structs appended one by one)", len(got), len(wantBytes))
			}
			var got bytes.Buffer
			if _, err := fr.writeTo(&got, []byte{0, 0, 0, 0, 9, 9, 9, 9}); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes()[8:], wantBytes) || int(binary.BigEndian.Uint32(got.Bytes())) != got.Len()-4 {
				t.Fatalf("writeTo wrote %d bytes, want %d", got.Len()-8, len(wantBytes))
			}
		})
	}
	if open != 0 {
		t.Fatalf("%d chunks left open", open)
	}
}

type countingInt int

// testChunk is a Chunk of pseudo-random bytes.
type testChunk struct {
	b    []byte
	open *countingInt
}

func newTestChunk(open *countingInt, n int) *testChunk {
	*open++
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + n)
	}
	return &testChunk{b: b, open: open}
}

func (c *testChunk) Len() int               { return len(c.b) }
func (c *testChunk) Bytes() ([]byte, error) { return c.b, nil }
func (c *testChunk) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(c.b)
	return int64(n), err
}

func (c *testChunk) Close() error {
	if c.open != nil {
		*c.open--
		c.open = nil
	}
	return nil
}

// TestFetchByteLimits checks KIP-74 and partition limits through the
// handler: the first partition with data returns a whole batch even when it
// exceeds the limits; later ones return only what fits, as Kafka does.
func TestFetchByteLimits(t *testing.T) {
	b := newMemBroker()
	mustCreate(t, b, "big", 3)
	batch := testBatch(50, -1, -1) // one batch, ~1 KiB
	for p := range int32(3) {
		for range 4 {
			if _, err := b.Produce(context.Background(), "big", p, batch, -1); err != nil {
				t.Fatal(err)
			}
		}
	}
	s := NewServer(b, Options{})
	defer s.Close()
	for _, tc := range []struct {
		name              string
		maxBytes, partMax int32
		wantBatches       []int // per partition
		// wantNoRecords: partitions read after the reply was full, asked
		// for their offsets only (issue 19: each was read and dropped).
		wantNoRecords int64
	}{
		{"everything", 1 << 20, 1 << 20, []int{4, 4, 4}, 0},
		{"partition limit below one batch", 1 << 20, 10, []int{1, 0, 0}, 0},
		{"partition limit two batches", 1 << 20, int32(2*len(batch) + 10), []int{2, 2, 2}, 0},
		{"response limit below one batch", 10, 1 << 20, []int{1, 0, 0}, 2},
		{"response limit five batches", int32(5*len(batch) + 10), 1 << 20, []int{4, 1, 0}, 0},
		{"response limit four batches", int32(4 * len(batch)), 1 << 20, []int{4, 0, 0}, 2},
		{"response limit four and a half batches", int32(9 * len(batch) / 2), 1 << 20, []int{4, 0, 0}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b.noRecordReads.Store(0)
			req := kmsg.NewPtrFetchRequest()
			req.Version, req.MaxBytes, req.SessionEpoch = fetchMax, tc.maxBytes, -1
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = "big", memTopicID(b, "big")
			for p := range int32(3) {
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.Partition, rp.PartitionMaxBytes = p, tc.partMax
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
			fr := s.fetch(context.Background(), req)
			defer fr.close()
			for p, want := range tc.wantBatches {
				got := 0
				if c := fr.topics[0].parts[p].records; c != nil {
					got = c.Len() / len(batch)
				}
				if got != want {
					t.Errorf("partition %d: %d batches, want %d", p, got, want)
				}
				if hw := fr.topics[0].parts[p].hw; hw != 200 {
					t.Errorf("partition %d: high watermark %d", p, hw)
				}
			}
			if n := b.noRecordReads.Load(); n != tc.wantNoRecords {
				t.Errorf("%d partitions read for their offsets only, want %d", n, tc.wantNoRecords)
			}
		})
	}
	if n := b.chunks.Load(); n != 0 {
		t.Fatalf("%d chunks left open", n)
	}
}

// TestFetchSessions walks a session through KIP-227: creation, incremental
// requests that answer only partitions with news, forgotten partitions,
// epoch and id errors, and closing.
func TestFetchSessions(t *testing.T) {
	b := newMemBroker()
	mustCreate(t, b, "s", 3)
	s := NewServer(b, Options{})
	defer s.Close()
	st := &connState{}
	ctx := withConnState(context.Background(), st)
	produce := func(p int32) {
		if _, err := b.Produce(ctx, "s", p, testBatch(2, -1, -1), -1); err != nil {
			t.Fatal(err)
		}
	}
	fetch := func(id, epoch int32, offsets map[int32]int64, forget ...int32) *fetchReply {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.SessionID, req.SessionEpoch, req.MaxBytes = 12, id, epoch, 1<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "s"
		for p := range int32(3) {
			if off, ok := offsets[p]; ok {
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, off, 1<<20
				rt.Partitions = append(rt.Partitions, rp)
			}
		}
		req.Topics = append(req.Topics, rt)
		if len(forget) > 0 {
			req.ForgottenTopics = []kmsg.FetchRequestForgottenTopic{{Topic: "s", Partitions: forget}}
		}
		fr := s.fetch(ctx, req)
		t.Cleanup(fr.close)
		return fr
	}
	answered := func(fr *fetchReply) map[int32]int {
		out := map[int32]int{}
		for _, rt := range fr.topics {
			for _, rp := range rt.parts {
				n := 0
				if c := rp.records; c != nil {
					n = c.Len()
				}
				out[rp.partition] = n
			}
		}
		return out
	}

	produce(0)
	full := fetch(0, 0, map[int32]int64{0: 0, 1: 0, 2: 0})
	if full.SessionID == 0 || full.ErrorCode != 0 || len(answered(full)) != 3 {
		t.Fatalf("creating fetch: session %d error %d partitions %v", full.SessionID, full.ErrorCode, answered(full))
	}
	id := full.SessionID
	// Nothing new: an empty incremental answer.
	if got := answered(fetch(id, 1, map[int32]int64{0: 2})); len(got) != 0 {
		t.Fatalf("incremental without news answered %v", got)
	}
	// New records on partition 2 (its position kept from the session).
	produce(2)
	if got := answered(fetch(id, 2, nil)); len(got) != 1 || got[2] == 0 {
		t.Fatalf("incremental after produce to 2 answered %v", got)
	}
	// Forget partition 1, then records there are not reported.
	fetch(id, 3, map[int32]int64{2: 2}, 1)
	produce(1)
	if got := answered(fetch(id, 4, nil)); len(got) != 0 {
		t.Fatalf("forgotten partition answered: %v", got)
	}
	for _, tc := range []struct {
		id, epoch int32
		want      int16
	}{
		{id, 9, kerr.InvalidFetchSessionEpoch.Code},
		{id + 1, 5, kerr.FetchSessionIDNotFound.Code},
		{0, 3, kerr.FetchSessionIDNotFound.Code},
	} {
		if fr := fetch(tc.id, tc.epoch, nil); fr.ErrorCode != tc.want {
			t.Errorf("session %d epoch %d: error %d, want %d", tc.id, tc.epoch, fr.ErrorCode, tc.want)
		}
	}
	// Epoch -1 closes the session: a full, sessionless answer.
	if fr := fetch(id, -1, map[int32]int64{0: 0}); fr.SessionID != 0 || fr.ErrorCode != 0 || len(answered(fr)) != 1 || st.session != nil {
		t.Fatalf("closing fetch: session %d error %d", fr.SessionID, fr.ErrorCode)
	}
	if fr := fetch(id, 5, nil); fr.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("closed session still answers: error %d", fr.ErrorCode)
	}
	// Without connection state (no session support) every fetch is full.
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.SessionEpoch = 12, 0
	if fr := s.fetch(context.Background(), req); fr.SessionID != 0 || fr.ErrorCode != 0 {
		t.Fatalf("sessionless: %+v", fr.FetchResponse)
	}
}

// A fetch running when the listener closes reads no more partitions: its
// answer goes nowhere, and at 300,000 partitions reading the rest of a
// follower's session held the stop ~2 s after Close (issue 19). Each
// partition not read is answered NOT_LEADER_OR_FOLLOWER.
func TestFetchReadsNothingOnceClosing(t *testing.T) {
	b := newMemBroker()
	mustCreate(t, b, "t", 8)
	s := NewServer(b, Options{})
	req := kmsg.NewPtrFetchRequest()
	req.Topics = append(req.Topics, requestTopic("t", partitionsUpTo(8)...))
	targets := requestTargets(req)
	if _, failed := s.fetchOnce(context.Background(), req, targets); failed || b.reads.Load() != 8 {
		t.Fatalf("open listener: failed %v, %d reads, want 8", failed, b.reads.Load())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b.reads.Store(0)
	if _, failed := s.fetchOnce(ctx, req, targets); !failed || b.reads.Load() != 0 {
		t.Fatalf("closing listener: failed %v, %d reads, want none", failed, b.reads.Load())
	}
	for _, tg := range targets {
		if tg.errCode != kerr.NotLeaderForPartition.Code {
			t.Fatalf("partition %d not read answered %d", tg.partition, tg.errCode)
		}
	}
}

// requestTopic is a Fetch request's topic asking for parts from offset 0,
// 1 MiB each.
func requestTopic(topic string, parts ...int32) kmsg.FetchRequestTopic {
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	for _, p := range parts {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.PartitionMaxBytes = p, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
	}
	return rt
}

// partitionsUpTo is partitions 0 to n-1.
func partitionsUpTo(n int32) []int32 {
	parts := make([]int32, n)
	for i := range parts {
		parts[i] = int32(i)
	}
	return parts
}
