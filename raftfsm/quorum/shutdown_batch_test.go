package quorum_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/runnel/runnel/raftfsm"
)

// A controlled shutdown of a broker leading thousands of partitions moves
// them in a few batched commands (ChangePartitionsBatch across topics, as
// KRaft batches its records), not one raft entry per partition or topic, and every move keeps the rules: the leader
// epoch bumped once, the new leader an alive member of the old ISR, the
// broker shutting down out of the ISR, the other partitions untouched.
func TestControlledShutdownMovesLeadersInBatches(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-node cluster")
	}
	q := newQuorum(t, 3, 0, nil)
	q.waitReady()
	for i := range 3 {
		q.register(i, "")
	}
	const topics, partitions = 3, 2000
	for i := range topics {
		q.applyOn(0, createTopic(fmt.Sprintf("batch-%d", i), partitions, 2))
	}
	// Every node applies command version 2: the active controller raises
	// the cluster's to it and batches the moves across topics.
	waitFor(t, time.Minute, "command version 2", func() bool {
		img, _ := q.nodes[q.leader()].Image()
		return img.CommandVersion == raftfsm.CommandVersion
	})
	broker := (q.leader() + 1) % 3
	id := q.cfgs[broker].NodeID
	before := q.converged()
	led := 0
	for _, tp := range before.Topics.All() {
		for _, p := range tp.Partitions {
			if p.Leader == id {
				led++
			}
		}
	}
	if led < topics*partitions/4 {
		t.Fatalf("broker %d leads %d of %d partitions", id, led, topics*partitions)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := q.nodes[broker].ControlledShutdown(ctx); err != nil {
		t.Fatal(err)
	}
	after, _ := q.nodes[broker].Image()
	// The broker's state, one batch for every topic (under
	// maxBatchTopicBytes), and room for a fencing or a reconcile racing
	// the shutdown's own: far from one per partition or per topic.
	entries := after.Index - before.Index
	if entries > 1+1+4 {
		t.Errorf("%d leaderships moved in %d raft entries", led, entries)
	}
	t.Logf("%d leaderships moved in %d raft entries", led, entries)
	for name, tp := range after.Topics.All() {
		was := before.Topics.Get(name).Partitions
		for i, p := range tp.Partitions {
			old := was[i]
			if old.Leader != id {
				if p.LeaderEpoch != old.LeaderEpoch || p.Leader != old.Leader {
					t.Fatalf("%s/%d not led by %d changed: %+v -> %+v", name, i, id, old, p)
				}
				continue
			}
			b := after.Brokers[p.Leader]
			switch {
			case p.Leader == id:
				t.Fatalf("%s/%d still led by the broker shutting down: %+v", name, i, p)
			case !slices.Contains(old.ISR, p.Leader) || b == nil || b.State != raftfsm.BrokerAlive:
				t.Fatalf("%s/%d moved to %d, not an alive member of ISR %v", name, i, p.Leader, old.ISR)
			case p.LeaderEpoch != old.LeaderEpoch+1:
				t.Fatalf("%s/%d leader epoch %d after %d", name, i, p.LeaderEpoch, old.LeaderEpoch)
			case slices.Contains(p.ISR, id):
				t.Fatalf("%s/%d ISR %v keeps the broker shutting down", name, i, p.ISR)
			}
		}
	}
}
