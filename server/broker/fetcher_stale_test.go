package broker

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/segments"

	"github.com/runnel/runnel/recordbatch"
	"github.com/runnel/runnel/server/broker/kafkaconn"
	"github.com/runnel/runnel/server/broker/replfetch"
)

// fakeLeader answers a follower's OffsetForLeaderEpoch and Fetch requests
// on one connection from p's log, as p's broker would as leader. With hold
// set, each Fetch is answered only once hold is closed (a leader paused
// with the request in flight); fetched is told when one arrives.
type fakeLeader struct {
	p       *Partition
	others  []*Partition // more partitions it leads, by index
	hold    chan struct{}
	fetched chan struct{}
	// sessionID, when set, is the fetch session the fake grants (it keeps
	// none: it answers the partitions a request lists); requests is told
	// of every Fetch.
	sessionID int32
	requests  chan *kmsg.FetchRequest
	// quiet leaves out of an answer the partitions it has no record for
	// past the request's offset, as a session's leader leaves out those
	// without news, and answers nothing after the request's MaxWait (else
	// it answers every partition listed, at once).
	quiet     bool
	epochAsks atomic.Int32 // OffsetForLeaderEpoch requests answered
	// holdEpochs, when set, holds each OffsetForLeaderEpoch answer until
	// it can receive from it (closed: answer at once).
	holdEpochs chan struct{}
}

// part is the partition the fake leads with index i.
func (l *fakeLeader) part(i int32) *Partition {
	for _, p := range l.others {
		if p.index == i {
			return p
		}
	}
	return l.p
}

func (l *fakeLeader) serve(t testing.TB, conn net.Conn) {
	defer conn.Close()
	r := bufio.NewReader(conn)
	for {
		var size [4]byte
		if _, err := io.ReadFull(r, size[:]); err != nil {
			return
		}
		body := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(r, body); err != nil {
			return
		}
		// Request header v1/v2: key, version, correlation id, client id
		// (int16 length), then tagged fields for flexible requests.
		key, version := int16(binary.BigEndian.Uint16(body)), int16(binary.BigEndian.Uint16(body[2:]))
		corr := body[4:8]
		idLen := int(int16(binary.BigEndian.Uint16(body[8:])))
		rest := body[10+max(idLen, 0):]
		req := kmsg.RequestForKey(key)
		req.SetVersion(version)
		if req.IsFlexible() {
			rest = rest[1:] // no tagged fields
		}
		if err := req.ReadFrom(rest); err != nil {
			t.Errorf("fake leader: decode %s: %v", kmsg.NameForKey(key), err)
			return
		}
		var resp kmsg.Response
		switch req := req.(type) {
		case *kmsg.OffsetForLeaderEpochRequest:
			if l.holdEpochs != nil {
				<-l.holdEpochs
			}
			l.epochAsks.Add(1)
			out := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
			for _, rt := range req.Topics {
				ot := kmsg.NewOffsetForLeaderEpochResponseTopic()
				ot.Topic = rt.Topic
				for _, rp := range rt.Partitions {
					op := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
					op.Partition = rp.Partition
					epoch, end, err := l.part(rp.Partition).EndOffsetForEpoch(rp.LeaderEpoch)
					if err != nil {
						t.Errorf("fake leader: end offset for epoch %d: %v", rp.LeaderEpoch, err)
					}
					op.LeaderEpoch, op.EndOffset = epoch, end
					ot.Partitions = append(ot.Partitions, op)
				}
				out.Topics = append(out.Topics, ot)
			}
			resp = out
		case *kmsg.FetchRequest:
			if l.fetched != nil {
				l.fetched <- struct{}{}
			}
			if l.hold != nil {
				<-l.hold
			}
			select { // nil or full: the test stopped listening
			case l.requests <- req:
			default:
			}
			out := req.ResponseKind().(*kmsg.FetchResponse)
			if req.SessionEpoch >= 0 {
				out.SessionID = l.sessionID
			}
			for _, rt := range req.Topics {
				ot := kmsg.NewFetchResponseTopic()
				ot.Topic = rt.Topic
				for _, rp := range rt.Partitions {
					op := kmsg.NewFetchResponseTopicPartition()
					op.Partition = rp.Partition
					lp := l.part(rp.Partition)
					if l.quiet && rp.FetchOffset >= lp.log().EndOffset() {
						continue
					}
					op.HighWatermark, op.LogStartOffset = lp.log().EndOffset(), lp.log().StartOffset()
					if rp.FetchOffset < lp.log().EndOffset() {
						c, err := lp.ReadReplica(rp.FetchOffset, int(rp.PartitionMaxBytes))
						if err != nil {
							t.Errorf("fake leader: read at %d: %v", rp.FetchOffset, err)
							return
						}
						op.RecordBatches, _ = c.Bytes()
						c.Close()
					}
					ot.Partitions = append(ot.Partitions, op)
				}
				out.Topics = append(out.Topics, ot)
			}
			if l.quiet && !slices.ContainsFunc(out.Topics, func(ot kmsg.FetchResponseTopic) bool { return len(ot.Partitions) > 0 }) {
				time.Sleep(time.Duration(req.MaxWaitMillis) * time.Millisecond) // nothing to say: wait as a leader does
			}
			resp = out
		default:
			t.Errorf("fake leader: unexpected %s", kmsg.NameForKey(key))
			return
		}
		frame := append([]byte{0, 0, 0, 0}, corr...)
		if resp.IsFlexible() {
			frame = append(frame, 0) // no header tags
		}
		frame = resp.AppendTo(frame)
		binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
		if _, err := conn.Write(frame); err != nil {
			return
		}
	}
}

// testFetcher is a fetcher of leader's partitions for tests that drive its
// rounds themselves (round, or collect and then truncate or fetch),
// following each partition of states in the state given.
func testFetcher(m *fetchManager, leader int32, states map[*Partition]*followState) *leaderFetcher {
	f := newLeaderFetcher(m, leader)
	for p, st := range states {
		f.parts.Add(p, st)
		p.follower.Store(f)
	}
	return f
}

// followingBroker starts broker 1 with cfg (NodeID, Logger and DialLeader
// set here, DataDir a temporary directory when empty), reaching leader
// for every leader, and reconciles it with topic "t" of n partitions led
// by broker 2 in epoch 1 (replicas 1 and 2, ISR 2): it follows them all
// from leader. The caller closes it.
func followingBroker(t *testing.T, leader *fakeLeader, n int, cfg Config) *Broker {
	t.Helper()
	cfg.NodeID, cfg.Logger = 1, slog.New(slog.DiscardHandler)
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	cfg.DialLeader = func(context.Context, int32) (net.Conn, error) {
		client, server := net.Pipe()
		go leader.serve(t, server)
		return client, nil
	}
	b, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	topic := &raftfsm.Topic{ID: [16]byte{1}, Name: "t", Configs: map[string]string{}}
	for range n {
		topic.Partitions = append(topic.Partitions, raftfsm.Partition{Leader: 2, LeaderEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{2}})
	}
	if err := b.Reconcile(&raftfsm.Image{Index: 5, Topics: raftfsm.TopicMapOf(topic)}); err != nil {
		b.Close()
		t.Fatal(err)
	}
	return b
}

// connectFake returns a follower-side connection to a fake leader.
func connectFake(t testing.TB, l *fakeLeader) *kafkaconn.Conn {
	client, server := net.Pipe()
	go l.serve(t, server)
	t.Cleanup(func() { client.Close() })
	return kafkaconn.New(client, "test-follower")
}

// A fetch response from a previous leader that arrives after the follower
// moved to the next leader (the old leader was paused with the request in
// flight and answered on SIGCONT) must not be appended: the follower has
// already been truncated against the new leader, so the old leader's tail
// lands past it, and the new leader's batches at those offsets then start
// below the follower's log end. The follower used to append it and then
// fail every fetch after with "corrupt record batch: batch 0 has base
// offset X below Y", out of the ISR for good (issue 20: the high watermark
// of one node never reached the log end after pausing the active
// controller).
func TestFollowerDropsFetchAnsweredByPreviousLeader(t *testing.T) {
	oldLeader, newLeader, follower := epochTestPartition(t, 1), epochTestPartition(t, 3), epochTestPartition(t, 2)
	// Epoch 3, led by 1: all three hold offsets 0-4.
	lead(t, oldLeader, 3, "e3", 5)
	follow(follower, 1, 3)
	replicate(t, oldLeader, follower)
	follow(newLeader, 1, 3)
	replicate(t, oldLeader, newLeader)

	m := testFetchManager(t, 2)
	// The follower asks the old leader for offset 5; the old leader has
	// written 5-7 meanwhile but answers only after its pause.
	lead(t, oldLeader, 3, "late", 3)
	old := &fakeLeader{p: oldLeader, hold: make(chan struct{}), fetched: make(chan struct{}, 1)}
	oldFetcher := testFetcher(m, 1, map[*Partition]*followState{follower: {truncated: true}})
	oldDone := make(chan error, 1)
	go func() { oldDone <- oldFetcher.round(connectFake(t, old)) }()
	<-old.fetched

	// Meanwhile broker 3 is elected at epoch 4 without 5-7 and writes
	// one batch of five records at 5-9; the follower follows it and checks
	// its log against it (nothing to cut: it ends at 5 too).
	newLeader.setMeta(raftfsm.Partition{Leader: 3, LeaderEpoch: 4, Replicas: []int32{1, 2, 3}, ISR: []int32{2, 3}}, 3)
	var five []recordbatch.NewRecord
	for i := range 5 {
		five = append(five, recordbatch.NewRecord{Value: fmt.Appendf(nil, "e4-%d", i), Timestamp: 1})
	}
	if _, err := newLeader.append(recordbatch.Build(five)); err != nil {
		t.Fatal(err)
	}
	follower.setMeta(raftfsm.Partition{Leader: 3, LeaderEpoch: 4, Replicas: []int32{1, 2, 3}, ISR: []int32{2, 3}}, 2)
	newFetcher := testFetcher(m, 3, map[*Partition]*followState{follower: {}})
	newConn := connectFake(t, &fakeLeader{p: newLeader})
	newFetcher.collect()
	if err := newFetcher.truncate(newConn); err != nil {
		t.Fatal(err)
	}

	// The old leader wakes up and answers with 5-7 at epoch 3.
	close(old.hold)
	if err := <-oldDone; err != nil {
		t.Logf("old leader's fetch: %v", err)
	}
	if end := follower.log().EndOffset(); end != 5 {
		t.Errorf("follower log end %d after the old leader's late answer, want 5 (the answer dropped)", end)
	}

	// The follower replicates from the new leader, as the fetcher loop
	// does: truncate where needed, fetch.
	for round := 0; round < 5 && follower.log().EndOffset() != newLeader.log().EndOffset(); round++ {
		if err := newFetcher.round(newConn); err != nil {
			t.Errorf("round %d: %v", round, err)
		}
	}
	if !bytes.Equal(logBytes(t, follower), logBytes(t, newLeader)) {
		t.Fatalf("follower's log differs from the new leader's: log end %d vs %d, epochs %v vs %v",
			follower.log().EndOffset(), newLeader.log().EndOffset(), batchEpochs(t, follower), batchEpochs(t, newLeader))
	}
}

// One partition whose fetched batches cannot be appended (here: a log that
// ends inside the leader's batch, as the leadership race of
// TestAppendRacingLeadershipMove left it) must not stop the other
// partitions fetched from the same leader: the fetcher used to drop the
// whole answer and the connection, so every partition it led stayed
// behind and out of the ISR with the stuck one (the rolling-restart chaos
// failure: 2 of 3 partitions never took the restarted node back).
func TestFetchFailureOfOnePartitionSparesTheOthers(t *testing.T) {
	part := func(index, self int32) *Partition {
		log, err := segments.Open(t.TempDir(), segments.DefaultConfig(), segments.Options{})
		if err != nil {
			t.Fatal(err)
		}
		p := newPartition("t", index, [16]byte{1}, log, nil)
		p.repl.self = self
		t.Cleanup(func() { p.close() })
		return p
	}
	leader0, leader1 := part(0, 1), part(1, 1)
	follower0, follower1 := part(0, 2), part(1, 2)
	// Partition 0: the leader holds one batch of five records at 0-4, the
	// follower three batches of its own at 0-2 under the same epoch.
	leader0.setMeta(raftfsm.Partition{Leader: 1, LeaderEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1}}, 1)
	var five []recordbatch.NewRecord
	for i := range 5 {
		five = append(five, recordbatch.NewRecord{Value: fmt.Appendf(nil, "v%d", i), Timestamp: 1})
	}
	if _, err := leader0.append(recordbatch.Build(five)); err != nil {
		t.Fatal(err)
	}
	lead(t, follower0, 1, "mine", 3)
	follow(follower0, 1, 1)
	// Partition 1: the follower is simply behind.
	lead(t, leader1, 1, "p1", 4)
	follow(follower1, 1, 1)

	m := testFetchManager(t, 2)
	f := testFetcher(m, 1, map[*Partition]*followState{follower0: {truncated: true}, follower1: {truncated: true}})
	if err := f.round(connectFake(t, &fakeLeader{p: leader0, others: []*Partition{leader1}})); err != nil {
		t.Errorf("fetch: %v", err)
	}
	if !bytes.Equal(logBytes(t, follower1), logBytes(t, leader1)) {
		t.Fatalf("partition 1 not replicated beside partition 0's failure: log end %d, leader's %d",
			follower1.log().EndOffset(), leader1.log().EndOffset())
	}
	if st, _ := f.parts.Get(follower0); st.truncated {
		t.Error("partition 0 fetches on without checking its divergence again")
	}
}

// An answer to a fetch sent at a position the log has moved past since
// (its records were applied from an earlier answer) is dropped, as Kafka's
// fetcher drops an answer whose fetch offset is no longer the log end: the
// follower used to try to append it, fail ("batch 0 has base offset 1
// below 2") and check its divergence from the leader again before
// fetching on (issue 19: thousands of such failures a second after a
// kill -9 at 100,000 partitions).
func TestFollowerDropsAnswerToAStalePosition(t *testing.T) {
	leader, follower := epochTestPartition(t, 1), epochTestPartition(t, 2)
	lead(t, leader, 1, "v", 2)
	follow(follower, 1, 1)
	all, err := leader.ReadReplica(0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := all.Bytes()
	all.Close()
	if err := follower.appendAsFollower(data, 1); err != nil {
		t.Fatal(err)
	}
	second, err := leader.ReadReplica(1, 1<<20) // what a fetch at 1 brings
	if err != nil {
		t.Fatal(err)
	}
	rp := kmsg.NewFetchResponseTopicPartition()
	rp.RecordBatches, _ = second.Bytes()
	second.Close()
	rp.HighWatermark, rp.LogStartOffset = 2, 0
	st := &followState{truncated: true}
	f := testFetcher(testFetchManager(t, 2), 1, map[*Partition]*followState{follower: st})
	if err := f.applyFetched(follower, st, &rp, replfetch.Pos{LeaderEpoch: 1, Offset: 1}); err != nil {
		t.Fatalf("apply of an answer to a fetch at 1, log end 2: %v", err)
	}
	if !st.truncated {
		t.Fatal("the follower checks its divergence again after a stale answer")
	}
	if end := follower.log().EndOffset(); end != 2 {
		t.Fatalf("log end %d after a stale answer, want 2", end)
	}
}
