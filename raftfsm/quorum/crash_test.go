package quorum_test

import (
	"context"
	"testing"
	"time"

	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/raftfsm/quorum"
)

// A crashed active controller is replaced through the leader watch: a
// survivor stands at once (one crash election, in the next term: no split
// vote) instead of after raft's heartbeat timeout; a leader that is only
// cut off (its port still accepts, as a live process's does) is left to
// the timeout. Times are measured in BenchmarkControllerScale, not here.
func TestCrashedLeaderReplacedAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-node cluster")
	}
	q := newQuorum(t, 3, 0, nil) // the default 1 s timeout of several voters
	q.waitReady()
	alloc := raftfsm.Command{AllocateProducerIDs: &raftfsm.AllocateProducerIDs{Count: 1}}

	lead := q.leader()
	term := q.maxTerm()
	q.crash(lead)
	survivor := (lead + 1) % 3
	q.applyOn(survivor, alloc)
	next := q.leader()
	if next == lead {
		t.Fatalf("node %d still leads after its crash", lead+1)
	}
	if got := q.nodes[next].Status().Term; got != term+1 {
		t.Errorf("new leader's term %d after a crash in term %d: want one election", got, term)
	}
	if stands := crashElections(q, lead); stands != 1 {
		t.Errorf("survivors stood %d times through the leader watch, want 1", stands)
	}
	q.stop(lead)
	q.uncrash(lead)
	q.start(lead)
	q.waitReady()

	// Cut off, not dead: the timeout elects the next leader.
	lead = q.leader()
	before := make([]uint64, 3)
	for i, n := range q.nodes {
		before[i] = n.CrashElections()
	}
	q.isolate(lead, true)
	survivor = (lead + 1) % 3
	q.applyOn(survivor, alloc)
	for i, n := range q.nodes {
		if i != lead && n.CrashElections() != before[i] {
			t.Errorf("node %d stood through the leader watch when its leader was only cut off", i+1)
		}
	}
	q.isolate(lead, false)
}

// crashElections counts the elections the nodes but skip started through
// the leader watch.
func crashElections(q *proxied, skip int) uint64 {
	var n uint64
	for i, node := range q.nodes {
		if i != skip && node != nil {
			n += node.CrashElections()
		}
	}
	return n
}

// A broker whose process died (its connections end, its port refuses) is
// fenced, and its partitions led by another ISR member, as soon as the
// active controller's raft connection to it ends: not once its heartbeats
// are late (one and a half of the controllers' heartbeat interval, a
// minute and a half here) nor after its session timeout (an hour). Times
// are measured in BenchmarkControllerBrokerKill, not here.
func TestKilledBrokerFencedBeforeItsHeartbeatsAreLate(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-node cluster")
	}
	q := newQuorum(t, 3, 2, func(c *quorum.Config) {
		c.SessionTimeout = time.Hour
		if c.NodeID <= 3 {
			c.HeartbeatInterval = time.Minute // what the active controller waits for
		}
	})
	q.waitReady()
	b4 := q.register(3, "")
	q.register(4, "")
	q.applyOn(0, raftfsm.Command{CreateTopic: &raftfsm.CreateTopic{Name: "t", Partitions: 1, ReplicationFactor: 2,
		Assignments: [][]int32{{4, 5}}}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	q.converged()
	q.crash(3)
	for {
		img, changed := q.nodes[0].Image()
		if p := img.Topics.Get("t").Partitions[0]; img.Brokers[4].State == raftfsm.BrokerFenced && p.Leader == 5 {
			if img.Brokers[4].Epoch != b4.Epoch {
				t.Fatalf("broker 4 at epoch %d, registered at %d", img.Brokers[4].Epoch, b4.Epoch)
			}
			break
		}
		select {
		case <-changed:
		case <-ctx.Done():
			p := img.Topics.Get("t").Partitions[0]
			t.Fatalf("30 s after broker 4's process died: broker 4 %s, t-0 led by %d; want fenced, led by 5", img.Brokers[4].State, p.Leader)
		}
	}
	q.uncrash(3)
}
