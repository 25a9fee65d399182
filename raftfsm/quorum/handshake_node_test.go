package quorum_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/raftfsm/quorum"
)

// A quorum whose nodes share a cluster secret elects, applies and lets a
// broker with the secret join; a broker with another secret never gets in
// (every dial it makes is refused) and the controllers log why.
func TestQuorumWithClusterSecret(t *testing.T) {
	secret := func(s string) func(*quorum.Config) {
		return func(c *quorum.Config) { c.ClusterSecret = []byte(s) }
	}
	q := newQuorum(t, 3, 0, secret("shared"))
	q.waitReady()
	if _, err := q.apply(raftfsm.Command{AllocateProducerIDs: &raftfsm.AllocateProducerIDs{Count: 1}}); err != nil {
		t.Fatal(err)
	}

	intruder := q.addBroker(4, secret("other"))
	q.start(intruder)
	member := q.addBroker(5, secret("shared"))
	q.start(member)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := q.nodes[member].WaitReady(ctx); err != nil {
		t.Fatalf("broker with the secret: %v", err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := q.nodes[intruder].WaitReady(ctx); err == nil {
		t.Fatal("broker with a wrong secret became ready")
	}
	for _, v := range q.nodes[q.leader()].Status().Voters {
		if v.ID == 4 {
			t.Fatalf("broker with a wrong secret is in the configuration: %+v", v)
		}
	}
	rejected := false
	for i := range 3 {
		rejected = rejected || strings.Contains(q.logs[i].String(), "rejected connection")
	}
	if !rejected {
		t.Fatal("no controller logged the rejected connections")
	}
}
