package quorum_test

import (
	"testing"
	"time"

	"github.com/runnel/runnel/raftfsm/quorum"
)

// A controller cut off from the other voters still believes it leads raft
// for a while (until its raft leader lease runs out). Its own broker's
// heartbeats, answered locally meanwhile, must not renew the broker's
// lease: the other voters elect a new controller, which fences the broker
// and moves its partition leaderships, and whatever the broker acknowledged
// as leader meanwhile is truncated later (issue 20: acks=1 writes lost after
// the active controller was paused and resumed). So the lease ends at most
// a session timeout after the last heartbeat the quorum could confirm,
// which is before the cut.
func TestBrokerLeaseNotRenewedByDeposedController(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-node cluster")
	}
	// A long raft election timeout keeps the cut-off leader believing it
	// leads for about two seconds (raft's leader lease is the timeout):
	// many broker heartbeats at testHeartbeat.
	q := newQuorum(t, 3, 0, func(c *quorum.Config) { c.ElectionTimeout = 2 * time.Second })
	q.waitReady()
	for i := range 3 {
		q.register(i, "")
	}
	old := q.leader()
	n := q.nodes[old]
	waitFor(t, 10*time.Second, "the leader's broker lease", func() bool { return n.BrokerLeaseValid(time.Now()) })
	cut := time.Now()
	q.isolate(old, true)
	defer q.isolate(old, false)
	if st := n.Status(); st.Role != "leader" {
		t.Fatalf("the cut-off node stopped leading at once (%+v): nothing tested", st)
	}
	waitFor(t, 20*time.Second, "the cut-off node to step down", func() bool { return n.Status().Role != "leader" })
	stepped := time.Since(cut)
	// Three heartbeat intervals of slack for the last heartbeat before the
	// cut (sent before it, answered after); far less than the time the node
	// kept believing it led.
	if at := cut.Add(testSession + 3*testHeartbeat); n.BrokerLeaseValid(at) {
		t.Fatalf("the broker's lease is still valid %v after the cut (session %v); the node believed it led for %v after the cut: a heartbeat it answered itself renewed the lease",
			at.Sub(cut), testSession, stepped.Round(time.Millisecond))
	}
	t.Logf("the cut-off node stepped down %v after the cut", stepped.Round(time.Millisecond))
}
