package broker

import (
	"context"
	"log/slog"
	"net"
	"testing"

	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/recordbatch"
	"github.com/runnel/runnel/server/broker/workpool"
)

// A follower's fetch loop lists no log directory (issue 19). Back from a
// restart, every log it follows is unopened, and whether one holds records
// is a listing of its directory: the loop made them one after the other,
// each a few syscalls that wait for a CPU on a loaded machine, and fetched
// nothing from that leader until it had listed all of them (a 3-node run
// at 100,000 partitions: the restarted node's loop for one leader was
// still listing 66,000 directories a minute after the restart, every one
// of those partitions one replica short). The listing is the pool's, with
// the open it may lead to. Here the pool runs nothing: a round's check
// must hand every unopened log to it, and list none itself.
func TestFollowerFetchLoopListsNoLogDirectory(t *testing.T) {
	const n = 8
	dir := t.TempDir()
	topic := func(leader int32) *raftfsm.Topic {
		tp := &raftfsm.Topic{ID: [16]byte{1}, Name: "t", Configs: map[string]string{}}
		for range n {
			tp.Partitions = append(tp.Partitions, raftfsm.Partition{Leader: leader, LeaderEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}})
		}
		return tp
	}
	// Logs written before a restart, half of them with records, led here.
	before, err := New(Config{NodeID: 1, DataDir: dir, Logger: slog.New(slog.DiscardHandler)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := before.Reconcile(&raftfsm.Image{Index: 2, Topics: raftfsm.TopicMapOf(topic(1))}); err != nil {
		t.Fatal(err)
	}
	for i := range int32(n) {
		p, err := before.Partition("t", i)
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			if _, err := p.append(recordbatch.Build([]recordbatch.NewRecord{{Value: []byte("v"), Timestamp: 1}})); err != nil {
				t.Fatal(err)
			}
		}
	}
	before.Close()

	// After the restart broker 2 leads them. The broker's own fetcher
	// never gets a connection: the test drives a fetcher of its own.
	b, err := New(Config{NodeID: 1, DataDir: dir, Logger: slog.New(slog.DiscardHandler),
		DialLeader: func(ctx context.Context, _ int32) (net.Conn, error) { <-ctx.Done(); return nil, ctx.Err() }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Reconcile(&raftfsm.Image{Index: 3, Topics: raftfsm.TopicMapOf(topic(2))}); err != nil {
		t.Fatal(err)
	}
	m := testFetchManager(t, 1)
	stopped, cancel := context.WithCancel(context.Background())
	cancel()
	m.pool = workpool.New(stopped, &m.wg, replicaApplyWorkers) // drops what it is given
	f := newLeaderFetcher(m, 2)
	var parts []*Partition
	for i := range int32(n) {
		p, err := b.Hosted("t", i)
		if err != nil {
			t.Fatal(err)
		}
		if p.log() != nil {
			t.Fatalf("t-%d open after the restart", i)
		}
		parts = append(parts, p)
		f.add(p)
	}
	f.collect()
	if err := f.truncate(nil); err != nil { // no log is open: nothing to ask the leader
		t.Fatal(err)
	}
	for _, p := range parts {
		if p.lazy.peeked.Load() != nil {
			t.Errorf("t-%d's directory was listed in the fetch loop", p.index)
		}
		if !p.applying.Load() {
			t.Errorf("t-%d was not handed to the pool", p.index)
		}
	}
}
