package kafkadoor

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"net"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/kafkaproto"
	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/recordbatch"
	"github.com/runnel/runnel/segments"
	"github.com/runnel/runnel/server/broker"
	"github.com/runnel/runnel/server/broker/kafkaconn"
)

// peerListener hands the listener's peer door connections that claim
// node id.
type peerListener struct {
	net.Listener
	id int32
}

type peerConn struct {
	net.Conn
	id int32
}

func (c peerConn) PeerNodeID() int32 { return c.id }

func (l peerListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return peerConn{c, l.id}, nil
}

// leaderRig is a real broker (node 1) leading every partition of topics
// (per partitions each, replicas 1 and 2, both in sync) behind a real
// listener, and a connection to its peer door as node 2, the follower.
type leaderRig struct {
	br   *broker.Broker
	k    *Backend
	conn *kafkaconn.Conn
}

func newLeaderRig(tb testing.TB, topics, per int) *leaderRig {
	tb.Helper()
	logger := slog.New(slog.DiscardHandler)
	br, err := broker.New(broker.Config{NodeID: 1, DataDir: tb.TempDir(), Files: segments.NewFileCache(64),
		Tails:  segments.NewTailCache(segments.DefaultTailBudget, 0), // the server's default (--log-tail-cache-bytes)
		Logger: logger, ReplicaLagMax: 30 * time.Second}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { br.Close() })
	var ts []*raftfsm.Topic
	for i := range topics {
		t := &raftfsm.Topic{ID: [16]byte{byte(i >> 8), byte(i), 1}, Name: fmt.Sprintf("idle%d", i), Configs: map[string]string{}}
		for range per {
			t.Partitions = append(t.Partitions, raftfsm.Partition{Leader: 1, LeaderEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}})
		}
		ts = append(ts, t)
	}
	img := &raftfsm.Image{Index: 2, Topics: raftfsm.TopicMapOf(ts...),
		Brokers: map[int32]*raftfsm.Broker{1: {ID: 1, State: raftfsm.BrokerAlive}, 2: {ID: 2, State: raftfsm.BrokerAlive}}}
	if err := br.Reconcile(img); err != nil {
		tb.Fatal(err)
	}
	k := New(Config{NodeID: 1, Meta: &fakeMeta{img: img, leader: 1}, Broker: br, Logger: logger})
	s := kafkaproto.NewServer(k, kafkaproto.Options{Logger: logger, MaxReplicaSessionPartitions: topics * per})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.ServePeers(ctx, peerListener{ln, 2})
	}()
	tb.Cleanup(func() { cancel(); s.Close(); <-done })
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		tb.Fatal(err)
	}
	c := kafkaconn.New(nc, "follower-2")
	tb.Cleanup(func() { c.Close() })
	return &leaderRig{br: br, k: k, conn: c}
}

// followerFetch is a follower's Fetch (v12) in session id at epoch, listing
// parts (topic -> partitions, all at offset 0).
func followerFetch(id, epoch int32, maxWait time.Duration, parts map[string][]int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.ReplicaID, req.MinBytes, req.MaxBytes = 2, 1, 8<<20
	req.MaxWaitMillis = int32(maxWait / time.Millisecond)
	req.SessionID, req.SessionEpoch = id, epoch
	for topic, ps := range parts {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		for _, p := range ps {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.CurrentLeaderEpoch, rp.PartitionMaxBytes = p, 1, 1<<20
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// openSession fills a session with every partition of the rig, 8 topics
// per request as a follower does (a request is bounded to 1 MiB), and
// returns its id and the next epoch.
func (r *leaderRig) openSession(tb testing.TB, topics, per int) (int32, int32) {
	tb.Helper()
	var id, epoch int32
	all := make([]int32, per)
	for i := range all {
		all[i] = int32(i)
	}
	for first := 0; first < topics; first += 8 {
		parts := map[string][]int32{}
		for i := first; i < min(first+8, topics); i++ {
			parts[fmt.Sprintf("idle%d", i)] = all
		}
		resp := r.fetch(tb, followerFetch(id, epoch, 0, parts))
		if first == 0 {
			id = resp.SessionID
		}
		epoch++
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					tb.Fatalf("%s-%d: %v", t.Topic, p.Partition, kerr.ErrorForCode(p.ErrorCode))
				}
			}
		}
	}
	if id == 0 {
		tb.Fatal("the leader opened no session")
	}
	return id, epoch
}

func (r *leaderRig) fetch(tb testing.TB, req *kmsg.FetchRequest) *kmsg.FetchResponse {
	tb.Helper()
	resp := kmsg.NewPtrFetchResponse()
	if err := r.conn.Do(context.Background(), req, resp); err != nil {
		tb.Fatal(err)
	}
	if resp.ErrorCode != 0 {
		tb.Fatalf("fetch: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	return resp
}

// BenchmarkFollowerSessionIdle (issue 19): one incremental fetch of a
// follower's session in which every partition is idle, over a real
// listener and broker (MaxWait 0: the request's own cost, no waiting). A
// leader answering it should do work for the partitions with news, not for
// every partition the session holds: compare ns/op and allocs/op of 1,000
// and 100,000 idle partitions.
func BenchmarkFollowerSessionIdle(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			const per = 1000
			topics := n / per
			r := newLeaderRig(b, topics, per)
			id, epoch := r.openSession(b, topics, per)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				resp := r.fetch(b, followerFetch(id, epoch, 0, nil))
				if len(resp.Topics) != 0 {
					b.Fatalf("an idle session's fetch answered %d topics", len(resp.Topics))
				}
				epoch++
			}
		})
	}
}

// A follower's session on a real broker and listener (issue 19): an idle
// incremental fetch answers nothing; a fetch waiting in it returns with the
// records appended to one of its partitions; the follower's next position
// moves the high watermark, which the answer then carries; and the
// partition is quiet again after.
func TestFollowerSessionFollowsNews(t *testing.T) {
	const topics, per = 3, 1000
	r := newLeaderRig(t, topics, per)
	id, epoch := r.openSession(t, topics, per)
	if resp := r.fetch(t, followerFetch(id, epoch, 0, nil)); len(resp.Topics) != 0 {
		t.Fatalf("idle fetch answered %+v", resp.Topics)
	}
	epoch++
	p, err := r.br.Partition("idle2", 517)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan *kmsg.FetchResponse, 1)
	go func() {
		resp := kmsg.NewPtrFetchResponse()
		if err := r.conn.Do(context.Background(), followerFetch(id, epoch, time.Hour, nil), resp); err != nil {
			t.Error(err)
		}
		done <- resp
	}()
	if _, err := p.Produce(context.Background(), recordbatch.Build([]recordbatch.NewRecord{{Value: []byte("v"), Timestamp: 1}}), 1); err != nil {
		t.Fatal(err)
	}
	resp := <-done
	epoch++
	if len(resp.Topics) != 1 || resp.Topics[0].Topic != "idle2" || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("the waiting fetch answered %+v, want idle2-517 alone", resp.Topics)
	}
	if rp := resp.Topics[0].Partitions[0]; rp.Partition != 517 || len(rp.RecordBatches) == 0 || rp.HighWatermark != 0 {
		t.Fatalf("idle2-517 answered %+v, want its record and high watermark 0", rp)
	}
	// The follower stored it: its next fetch names the new position.
	req := followerFetch(id, epoch, 0, map[string][]int32{"idle2": {517}})
	req.Topics[0].Partitions[0].FetchOffset = 1
	resp = r.fetch(t, req)
	epoch++
	if p.HighWatermark() != 1 {
		t.Fatalf("high watermark %d after the follower fetched at 1, want 1", p.HighWatermark())
	}
	if len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].HighWatermark != 1 {
		t.Fatalf("answer %+v, want idle2-517's new high watermark", resp.Topics)
	}
	if resp := r.fetch(t, followerFetch(id, epoch, 0, nil)); len(resp.Topics) != 0 {
		t.Fatalf("idle fetch after catching up answered %+v", resp.Topics)
	}
}

// BenchmarkFollowerSessionChanged (issue 19): a follower's session of
// 100,000 partitions in which changed of them were each appended one
// record of 100 bytes since its last fetch, over a real listener and
// broker. One op is what a follower does about them until it holds them
// all: fetches of at most 8 MiB of records each (100,000 records take
// three), each naming the new positions of what the last ones returned
// (8,000 partitions a request at most, under the leader's 1 MiB; the rest
// in the next), which also moves their high watermarks. The leader's work
// should follow changed, not the session's size: compare us/changed of 100
// and 100,000 changed. The appends are outside the timer. cpu-us/changed
// is the process's CPU (the follower's decoding included): steadier than
// wall time on a shared machine. 100,000 changed runs with RUNNEL_BENCH=1
// (6 s and 1.75 GB allocated an op); CI's bench-short runs 2,000.
func BenchmarkFollowerSessionChanged(b *testing.B) {
	const per, topics = 1000, 100
	r := newLeaderRig(b, topics, per)
	id, epoch := r.openSession(b, topics, per)
	record := recordbatch.Build([]recordbatch.NewRecord{{Value: make([]byte, 100), Timestamp: 1}})
	logEnd := make([]int64, topics*per) // the follower's log end in each partition
	sizes := []int{100, 2_000}
	if os.Getenv("RUNNEL_BENCH") == "1" {
		sizes = []int{100, 100_000}
	}
	for _, changed := range sizes {
		b.Run(fmt.Sprintf("changed=%d", changed), func(b *testing.B) {
			var parts []*broker.Partition
			for i := 0; i < topics*per; i += topics * per / changed {
				p, err := r.br.Partition(fmt.Sprintf("idle%d", i/per), int32(i%per))
				if err != nil {
					b.Fatal(err)
				}
				parts = append(parts, p)
			}
			b.ReportAllocs()
			var elapsed, cpu time.Duration
			requests, ops := 0, 0
			for ; b.Loop(); ops++ {
				b.StopTimer()
				for _, p := range parts {
					if _, err := p.Produce(context.Background(), record, 1); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
				start := time.Now()
				_, cpu0 := cpuTime(b)
				var moved []int // partitions whose new position the leader has yet to hear
				for caughtUp := 0; caughtUp < changed || len(moved) > 0; epoch++ {
					listed := moved[:min(len(moved), 8*per)]
					moved = moved[len(listed):]
					req := followerFetch(id, epoch, 0, nil)
					for _, i := range listed {
						topic := fmt.Sprintf("idle%d", i/per)
						if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != topic {
							rt := kmsg.NewFetchRequestTopic()
							rt.Topic = topic
							req.Topics = append(req.Topics, rt)
						}
						rp := kmsg.NewFetchRequestTopicPartition()
						rp.Partition, rp.CurrentLeaderEpoch, rp.PartitionMaxBytes = int32(i%per), 1, 1<<20
						rp.FetchOffset = logEnd[i]
						rt := &req.Topics[len(req.Topics)-1]
						rt.Partitions = append(rt.Partitions, rp)
					}
					resp := r.fetch(b, req)
					if requests++; requests > 1000*(ops+1) {
						b.Fatalf("%d requests, %d of %d partitions caught up", requests, caughtUp, changed)
					}
					for _, t := range resp.Topics {
						var ti int
						fmt.Sscanf(t.Topic, "idle%d", &ti)
						for _, p := range t.Partitions {
							i := ti*per + int(p.Partition)
							if len(p.RecordBatches) < 8 || int64(binary.BigEndian.Uint64(p.RecordBatches)) != logEnd[i] {
								continue // none, or sent again at a position left behind
							}
							logEnd[i]++
							moved = append(moved, i)
							caughtUp++
						}
					}
				}
				elapsed += time.Since(start)
				_, cpu1 := cpuTime(b)
				cpu += cpu1 - cpu0
			}
			b.ReportMetric(float64(elapsed.Microseconds())/float64(ops*changed), "us/changed")
			b.ReportMetric(float64(cpu.Microseconds())/float64(ops*changed), "cpu-us/changed")
			b.ReportMetric(float64(requests)/float64(ops), "requests/op")
		})
	}
}

// A follower's fetch whose reply is full asks the broker for the rest of
// its partitions' offsets only (issue 19): Backend.Fetch then reads no
// records, still counts the follower's position (the high watermark
// moves), and tells that records wait, so that the session reads them in
// its next fetch. Over the socket, a reply with room for one partition's
// records answers each of three in turn as the follower moves on.
func TestFollowerFetchPastAFullReply(t *testing.T) {
	r := newLeaderRig(t, 1, 1000)
	id, epoch := r.openSession(t, 1, 1000)
	record := recordbatch.Build([]recordbatch.NewRecord{{Value: make([]byte, 2000), Timestamp: 1}})
	for _, i := range []int32{1, 2, 3} {
		p, err := r.br.Partition("idle0", i)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Produce(context.Background(), record, 1); err != nil {
			t.Fatal(err)
		}
	}
	for i, want := range []int32{1, 2, 3} {
		req := followerFetch(id, epoch, 0, nil)
		if i > 0 { // the follower holds the last one's records now
			req = followerFetch(id, epoch, 0, map[string][]int32{"idle0": {want - 1}})
			req.Topics[0].Partitions[0].FetchOffset = 1
		}
		req.MaxBytes = 100
		resp := r.fetch(t, req)
		epoch++
		var got []int32
		for _, tp := range resp.Topics {
			for _, p := range tp.Partitions {
				if len(p.RecordBatches) > 0 {
					got = append(got, p.Partition)
				}
			}
		}
		if len(got) != 1 || got[0] != want {
			t.Fatalf("fetch %d answered records of %v, want idle0-%d's alone", i, got, want)
		}
	}
	fetch := func(offset int64) (kafkaproto.FetchResult, error) {
		return r.k.Fetch(context.Background(), kafkaproto.FetchRequest{Topic: "idle0", Partition: 3, Offset: offset,
			MaxBytes: 1 << 20, CurrentLeaderEpoch: 1, ReplicaID: 2, NoRecords: true})
	}
	if res, err := fetch(0); err != nil || res.Records != nil || !res.Pending || res.HighWatermark != 0 {
		t.Fatalf("NoRecords fetch of idle0-3 at 0: %+v, %v; want no records, pending, high watermark 0", res, err)
	}
	if res, err := fetch(1); err != nil || (res.Records != nil && res.Records.Len() != 0) || res.Pending || res.HighWatermark != 1 {
		t.Fatalf("NoRecords fetch of idle0-3 at its end: %+v, %v; want nothing pending, high watermark 1", res, err)
	}
}
