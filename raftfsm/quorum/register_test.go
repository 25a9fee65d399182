package quorum_test

import (
	"context"
	"testing"
	"time"

	"github.com/runnel/runnel/raftfsm"
)

// A broker registering on the active controller at the moment it loses its
// leadership (its registration proposed and never committed: "leadership
// lost while committing log") registers through the next controller
// instead of failing the node's start (seen in CI under load: "register
// broker 3: ... not the active controller").
func TestRegisterBrokerAcrossAnElection(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-node cluster")
	}
	q := newQuorum(t, 3, 0, nil)
	q.waitReady()
	old := q.leader()
	n := q.nodes[old]
	q.isolate(old, true)
	if st := n.Status(); st.Role != "leader" {
		t.Fatalf("the cut-off node stopped leading at once (%+v): nothing tested", st)
	}
	type result struct {
		b   *raftfsm.Broker
		err error
	}
	done := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		b, err := n.RegisterBroker(ctx, raftfsm.RegisterBroker{ID: q.cfgs[old].NodeID})
		done <- result{b, err}
	}()
	waitFor(t, 20*time.Second, "the cut-off node to step down", func() bool { return n.Status().Role != "leader" })
	q.isolate(old, false)
	r := <-done
	if r.err != nil {
		t.Fatalf("register broker %d across an election: %v", q.cfgs[old].NodeID, r.err)
	}
	if r.b.State != raftfsm.BrokerAlive {
		t.Fatalf("registered broker %+v", r.b)
	}
}
