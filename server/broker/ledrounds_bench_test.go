package broker

import (
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/runnel/runnel/kafkaproto/kapi"
	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/recordbatch"
	"github.com/runnel/runnel/segments"
)

// BenchmarkLedRounds is BenchmarkIdleRounds on a leader of replicated
// logs (issue 19): N partitions of replication factor 3 led here, each
// written once, whose followers 2 and 3 are in the ISR and hold every
// partition in one fetch session each (a watch at the log end, the
// session's clock ticking each round as its fetches would), and
// writesPerRound of them written a round and fetched to the end by both
// followers. The ISR round asks every partition whether its ISR should
// change, which BenchmarkIdleRounds (replication factor 1, no followers)
// never reaches: after a kill -9 at 300,000 partitions it was a fifth of
// each survivor's CPU. No ISR change is due in any round (checked).
// 2,000 logs; with RUNNEL_BENCH=1 100,000 and 300,000, or
// RUNNEL_BENCH_LOGS.
func BenchmarkLedRounds(b *testing.B) {
	sizes := []int{2_000}
	if os.Getenv("RUNNEL_BENCH") == "1" {
		sizes = []int{100_000, 300_000}
	}
	if n, err := strconv.Atoi(os.Getenv("RUNNEL_BENCH_LOGS")); err == nil && n > 0 {
		sizes = []int{n}
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("logs=%d", n), func(b *testing.B) { benchLedRounds(b, n) })
	}
}

func benchLedRounds(b *testing.B, logs int) {
	meta, br, parts := ledLogs(b, b.TempDir(), logs)
	defer br.Close()
	sessions := map[int32]*kapi.FetchClock{2: new(kapi.FetchClock), 3: new(kapi.FetchClock)}
	watches := map[*Partition][]*kapi.Watch{}
	for _, p := range parts {
		for id, clock := range sessions {
			w := kapi.NewWatch(func() {}, id, clock)
			w.SetPosition(p.log().EndOffset())
			p.Watch(w)
			watches[p] = append(watches[p], w)
		}
	}
	for _, clock := range sessions {
		clock.Tick(time.Now()) // the setup may have taken longer than the lag budget
	}
	followersFetch := func(p *Partition) {
		end := p.log().EndOffset()
		for _, w := range watches[p] {
			w.SetPosition(end)
		}
		for id := range sessions {
			if err := p.FollowerFetched(id, end, 1); err != nil {
				b.Fatal(err)
			}
		}
	}
	next := 0
	benchRounds(b, br, func() {
		for range writesPerRound {
			p := parts[next%logs]
			if _, err := p.append(recordbatch.Build([]recordbatch.NewRecord{{Value: []byte("w"), Timestamp: 1}})); err != nil {
				b.Fatal(err)
			}
			followersFetch(p)
			next += logs/writesPerRound + 1
		}
		now := time.Now()
		for _, clock := range sessions {
			clock.Tick(now) // each session's fetch, holding the idle ones
		}
	})
	b.StopTimer()
	meta.mu.Lock()
	defer meta.mu.Unlock()
	if meta.commands != 0 {
		b.Fatalf("%d ISR commands proposed (%d changes): the followers were caught up", meta.commands, len(meta.proposed))
	}
}

// ledLogs is broker 1 leading n partitions of one topic with replicas 1,
// 2 and 3, all in the ISR, each written once and fetched to its end by
// both followers.
func ledLogs(b testing.TB, dir string, n int) (*fakeMeta, *Broker, []*Partition) {
	t := &raftfsm.Topic{ID: [16]byte{8}, Name: "led", Configs: map[string]string{}}
	for range n {
		t.Partitions = append(t.Partitions, raftfsm.Partition{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1,
			Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}})
	}
	img := &raftfsm.Image{Index: 2, CommandVersion: 2, Topics: raftfsm.TopicMapOf(t), Brokers: map[int32]*raftfsm.Broker{
		1: {ID: 1, State: raftfsm.BrokerAlive}, 2: {ID: 2, State: raftfsm.BrokerAlive}, 3: {ID: 3, State: raftfsm.BrokerAlive}}}
	meta := &fakeMeta{img: img}
	br, err := New(Config{NodeID: 1, DataDir: dir, Files: segments.NewFileCache(1024),
		Logger: slog.New(slog.DiscardHandler), ReplicaLagMax: 30 * time.Second}, meta)
	if err != nil {
		b.Fatal(err)
	}
	if err := br.Reconcile(img); err != nil {
		b.Fatal(err)
	}
	parts := make([]*Partition, n)
	for i := range n {
		p, err := br.Partition("led", int32(i))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := p.append(recordbatch.Build([]recordbatch.NewRecord{{Value: []byte(fmt.Sprint(i)), Timestamp: 1}})); err != nil {
			b.Fatal(err)
		}
		for _, id := range []int32{2, 3} {
			if err := p.FollowerFetched(id, p.log().EndOffset(), 1); err != nil {
				b.Fatal(err)
			}
		}
		parts[i] = p
	}
	return meta, br, parts
}
