package quorum_test

import (
	"testing"

	"github.com/runnel/runnel/raftfsm"
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
