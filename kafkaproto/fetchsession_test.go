package kafkaproto

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A follower's session holds every partition it follows from this leader
// (up to Options.MaxReplicaSessionPartitions), not the 10,000 a client's
// may: past that the follower fell back to listing every partition in
// every fetch (issue 19). A client's larger fetch still runs sessionless.
func TestReplicaFetchSessionHoldsMoreThanClients(t *testing.T) {
	const topics, per = maxSessionPartitions/1000 + 1, 1000
	const n = topics * per
	b := newMemBroker()
	for i := range topics {
		mustCreate(t, b, fmt.Sprintf("s%d", i), per)
	}
	s := NewServer(b, Options{MaxReplicaSessionPartitions: n})
	defer s.Close()
	fetch := func(st *connState, replica int32) *fetchReply {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.ReplicaID, req.SessionEpoch, req.MaxBytes = 12, replica, 0, 1<<20
		for i := range topics {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = fmt.Sprintf("s%d", i)
			for p := range int32(per) {
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.Partition, rp.PartitionMaxBytes = p, 1<<10
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
		}
		fr := s.fetch(withConnState(context.Background(), st), req)
		t.Cleanup(fr.close)
		return fr
	}
	if fr := fetch(&connState{door: peerDoor, peerID: 2}, 2); fr.ErrorCode != 0 || fr.SessionID == 0 {
		t.Fatalf("follower fetch of %d partitions: error %d, session %d, want a session", n, fr.ErrorCode, fr.SessionID)
	}
	if fr := fetch(&connState{peerID: -1}, -1); fr.ErrorCode != 0 || fr.SessionID != 0 {
		t.Fatalf("client fetch of %d partitions: error %d, session %d, want none", n, fr.ErrorCode, fr.SessionID)
	}
}

// A session's fetch reads the partitions with news, not every partition
// it holds (issue 19): each fetch of a follower's 20,000-partition session
// read all 20,000 (and waited on each one's channel) though none had news.
// A waiting fetch wakes for an append to any one of them, and the records
// a fetch returns, like an error, are read again by the next. Followers'
// and clients' sessions alike.
func TestSessionFetchReadsOnlyNews(t *testing.T) {
	for _, replica := range []int32{2, -1} {
		t.Run(fmt.Sprintf("replica=%d", replica), func(t *testing.T) {
			const topics, per = 2, 1000
			b := newMemBroker()
			for i := range topics {
				mustCreate(t, b, fmt.Sprintf("n%d", i), per)
			}
			s := NewServer(b, Options{})
			defer s.Close()
			st := &connState{door: peerDoor, peerID: replica}
			if replica < 0 {
				st = &connState{peerID: -1}
			}
			ctx := withConnState(context.Background(), st)
			fetch := func(id, epoch int32, wait time.Duration, offsets map[string]map[int32]int64) *fetchReply {
				req := kmsg.NewPtrFetchRequest()
				req.Version, req.ReplicaID, req.SessionID, req.SessionEpoch = 12, replica, id, epoch
				req.MaxBytes, req.MinBytes, req.MaxWaitMillis = 1<<20, 1, int32(wait/time.Millisecond)
				for topic, parts := range offsets {
					rt := kmsg.NewFetchRequestTopic()
					rt.Topic = topic
					for p, off := range parts {
						rp := kmsg.NewFetchRequestTopicPartition()
						rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, off, 1<<20
						rt.Partitions = append(rt.Partitions, rp)
					}
					req.Topics = append(req.Topics, rt)
				}
				fr := s.fetch(ctx, req)
				t.Cleanup(fr.close)
				if fr.ErrorCode != 0 {
					t.Fatalf("fetch: error %d", fr.ErrorCode)
				}
				return fr
			}
			all := map[string]map[int32]int64{}
			for i := range topics {
				all[fmt.Sprintf("n%d", i)] = map[int32]int64{}
				for p := range int32(per) {
					all[fmt.Sprintf("n%d", i)][p] = 0
				}
			}
			full := fetch(0, 0, 0, all)
			id := full.SessionID
			if id == 0 || b.reads.Load() != topics*per {
				t.Fatalf("creating fetch: session %d, %d partitions read, want %d", id, b.reads.Load(), topics*per)
			}
			b.reads.Store(0)
			if fr := fetch(id, 1, 0, nil); len(fr.topics) != 0 || b.reads.Load() != 0 {
				t.Fatalf("idle fetch answered %d topics and read %d partitions, want none", len(fr.topics), b.reads.Load())
			}
			// A waiting fetch wakes for the one append, whenever it comes.
			done := make(chan *fetchReply)
			go func() {
				req := kmsg.NewPtrFetchRequest()
				req.Version, req.ReplicaID, req.SessionID, req.SessionEpoch = 12, replica, id, 2
				req.MaxBytes, req.MinBytes, req.MaxWaitMillis = 1<<20, 1, int32(time.Hour/time.Millisecond)
				done <- s.fetch(ctx, req)
			}()
			if _, err := b.Produce(ctx, "n1", 7, testBatch(2, -1, -1), -1); err != nil {
				t.Fatal(err)
			}
			fr := <-done
			defer fr.close()
			if len(fr.topics) != 1 || fr.topics[0].name != "n1" || len(fr.topics[0].parts) != 1 ||
				fr.topics[0].parts[0].partition != 7 || fr.topics[0].parts[0].records == nil || fr.topics[0].parts[0].records.Len() == 0 {
				t.Fatalf("the waiting fetch answered %+v, want n1-7's records", fr.topics)
			}
			if n := b.reads.Load(); n != 1 {
				t.Fatalf("the waiting fetch read %d partitions, want 1", n)
			}
			// Found records are read again (the client may not move on);
			// once it does, the partition is quiet again.
			b.reads.Store(0)
			if fr := fetch(id, 3, 0, nil); len(fr.topics) != 1 || b.reads.Load() != 1 {
				t.Fatalf("the next fetch answered %d topics, read %d partitions; want n1-7 again", len(fr.topics), b.reads.Load())
			}
			fetch(id, 4, 0, map[string]map[int32]int64{"n1": {7: 2}})
			b.reads.Store(0)
			if fr := fetch(id, 5, 0, nil); len(fr.topics) != 0 || b.reads.Load() != 0 {
				t.Fatalf("after moving on: %d topics answered, %d partitions read", len(fr.topics), b.reads.Load())
			}
			// A new log start is news too.
			if _, err := b.DeleteRecords(ctx, "n0", 3, 0); err != nil {
				t.Fatal(err)
			}
			if _, err := b.Produce(ctx, "n0", 3, testBatch(1, -1, -1), -1); err != nil {
				t.Fatal(err)
			}
			fetch(id, 6, 0, map[string]map[int32]int64{"n0": {3: 1}})
			if _, err := b.DeleteRecords(ctx, "n0", 3, 1); err != nil {
				t.Fatal(err)
			}
			b.reads.Store(0)
			if fr := fetch(id, 7, 0, nil); len(fr.topics) != 1 || fr.topics[0].parts[0].logStart != 1 || b.reads.Load() != 1 {
				t.Fatalf("after DeleteRecords: answered %+v, read %d partitions", fr.topics, b.reads.Load())
			}
			// The connection's end detaches every watch.
			st.endSession()
			if _, err := b.Produce(ctx, "n1", 8, testBatch(1, -1, -1), -1); err != nil {
				t.Fatal(err)
			}
			b.mu.Lock()
			defer b.mu.Unlock()
			for name, tp := range b.topics {
				for i, p := range tp.parts {
					if p.watchers.Len() != 0 {
						t.Fatalf("%s-%d still watched after the session ended", name, i)
					}
				}
			}
		})
	}
}

// A partition whose watch the broker could not attach when the session
// read it (the broker had not applied its topic yet; the read itself
// caught up and succeeded) is read again by the next fetch, which attaches
// it: left unwatched, the follower never heard of its records, its acks=all
// writes never completed (TestReassignmentMovesReplicasOnline).
func TestSessionRereadsUnwatchedPartition(t *testing.T) {
	b := newMemBroker()
	mustCreate(t, b, "late", 2)
	s := NewServer(b, Options{})
	defer s.Close()
	ctx := withConnState(context.Background(), &connState{door: peerDoor, peerID: 2})
	fetch := func(id, epoch int32, parts ...int32) *fetchReply {
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.ReplicaID, req.SessionID, req.SessionEpoch, req.MaxBytes = 12, 2, id, epoch, 1<<20
		if len(parts) > 0 {
			req.Topics = append(req.Topics, requestTopic("late", parts...))
		}
		fr := s.fetch(ctx, req)
		t.Cleanup(fr.close)
		if fr.ErrorCode != 0 {
			t.Fatalf("fetch: error %d", fr.ErrorCode)
		}
		return fr
	}
	b.watchMisses.Store(2)
	id := fetch(0, 0, 0, 1).SessionID
	fetch(id, 1) // reads both again, now watched
	if _, err := b.Produce(ctx, "late", 1, testBatch(1, -1, -1), -1); err != nil {
		t.Fatal(err)
	}
	fr := fetch(id, 2)
	if len(fr.topics) != 1 || len(fr.topics[0].parts) != 1 || fr.topics[0].parts[0].partition != 1 || fr.topics[0].parts[0].records == nil {
		t.Fatalf("after an append to late-1: answered %+v, want its records", fr.topics)
	}
}

// MinBytes in a session fetch counts the records of every partition with
// news, across the rounds of its wait: records appended to one partition
// (too few) are still answered when the next append, to another
// partition, makes enough, and the fetch waits for that.
func TestSessionFetchMinBytesAcrossPartitions(t *testing.T) {
	b := newMemBroker()
	mustCreate(t, b, "m", 3)
	s := NewServer(b, Options{})
	defer s.Close()
	ctx := withConnState(context.Background(), &connState{peerID: -1})
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.ReplicaID, req.SessionEpoch, req.MaxBytes = 12, -1, 0, 1<<20
	req.Topics = append(req.Topics, requestTopic("m", partitionsUpTo(3)...))
	full := s.fetch(ctx, req)
	full.close()
	batch := testBatch(1, -1, -1)
	wait := kmsg.NewPtrFetchRequest()
	wait.Version, wait.ReplicaID, wait.SessionID, wait.SessionEpoch = 12, -1, full.SessionID, 1
	wait.MaxBytes, wait.MinBytes, wait.MaxWaitMillis = 1<<20, int32(2*len(batch)), int32(time.Hour/time.Millisecond)
	done := make(chan *fetchReply)
	go func() { done <- s.fetch(ctx, wait) }()
	if _, err := b.Produce(ctx, "m", 0, batch, -1); err != nil {
		t.Fatal(err)
	}
	select {
	case fr := <-done:
		fr.close()
		t.Fatalf("answered %+v with fewer than MinBytes", fr.topics)
	default: // (it may not have read yet: the check below is what counts)
	}
	if _, err := b.Produce(ctx, "m", 2, batch, -1); err != nil {
		t.Fatal(err)
	}
	fr := <-done
	defer fr.close()
	got := map[int32]int{}
	for _, rt := range fr.topics {
		for _, rp := range rt.parts {
			if c := rp.records; c != nil {
				got[rp.partition] = c.Len()
			}
		}
	}
	if got[0] != len(batch) || got[2] != len(batch) || len(got) != 2 {
		t.Fatalf("answered records of %v (partition: bytes), want partitions 0 and 2 with %d each", got, len(batch))
	}
}

// A follower's session fetch running when the listener closes attaches and
// reads none of the partitions with news: at 300,000 partitions a round
// attaching 111,000 of them, each waiting for the broker's lock behind
// the leadership moves being applied, held the stop 1.3 s after Close
// (issue 19). The same fetch on an open listener reads them all.
func TestSessionFetchStopsOnceClosing(t *testing.T) {
	for _, closing := range []bool{false, true} {
		t.Run(fmt.Sprintf("closing=%v", closing), func(t *testing.T) {
			const per = 100
			b := newMemBroker()
			mustCreate(t, b, "t", per)
			s := NewServer(b, Options{})
			defer s.Close()
			st := &connState{door: peerDoor, peerID: 2}
			open := withConnState(context.Background(), st)
			fetch := func(ctx context.Context, id, epoch int32, parts int32) *fetchReply {
				req := kmsg.NewPtrFetchRequest()
				req.Version, req.ReplicaID, req.SessionID, req.SessionEpoch = 12, 2, id, epoch
				req.MaxBytes, req.MinBytes = 1<<20, 1
				if parts > 0 {
					req.Topics = append(req.Topics, requestTopic("t", partitionsUpTo(parts)...))
				}
				fr := s.fetch(ctx, req)
				t.Cleanup(fr.close)
				return fr
			}
			id := fetch(open, 0, 0, per).SessionID
			if id == 0 {
				t.Fatal("no session")
			}
			for p := range int32(per) { // news in every partition
				if _, err := b.Produce(open, "t", p, testBatch(1, -1, -1), -1); err != nil {
					t.Fatal(err)
				}
			}
			ctx := open
			if closing {
				cctx, cancel := context.WithCancel(context.Background())
				cancel()
				ctx = withConnState(cctx, st)
			}
			b.reads.Store(0)
			b.watches.Store(0)
			fetch(ctx, id, 1, 0)
			want := int64(per)
			if closing {
				want = 0
			}
			if b.reads.Load() != want || b.watches.Load() != want {
				t.Fatalf("fetch with news in %d partitions: %d read, %d attached, want %d", per, b.reads.Load(), b.watches.Load(), want)
			}
		})
	}
}
