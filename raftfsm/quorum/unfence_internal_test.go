package quorum

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/runnel/runnel/raftfsm"
)

// A fenced broker is unfenced only once its heartbeat shows it applied the
// metadata up to where the leader was when the broker came back: past the
// fencing and the leader moves that followed (issue 20, item 4: a broker
// back from a network partition was unfenced with metadata offset 14 while
// the controller was at 49, and led with its stale image meanwhile).
func TestFencedBrokerUnfencedOnlyWhenCaughtUp(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	n, err := Open(Config{NodeID: 1, Dir: t.TempDir(), BindAddr: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := n.Apply(ctx, raftfsm.Command{RegisterBroker: &raftfsm.RegisterBroker{ID: 2, IncarnationID: "b2", Heartbeats: true}})
	if err != nil {
		t.Fatal(err)
	}
	b := res.(*raftfsm.Broker)
	// Registered: caught up with its registration, it is unfenced.
	img, _ := n.Image()
	reply, err := n.onHeartbeat(ctx, heartbeat{ID: 2, Epoch: b.Epoch, Applied: img.Index})
	if err != nil || reply.State != raftfsm.BrokerAlive {
		t.Fatalf("first unfence: %+v %v", reply, err)
	}
	// Fenced (its session lapsed), then the metadata moves on while it is
	// away; it comes back having applied only up to its fencing.
	if _, err := n.Apply(ctx, raftfsm.Command{SetBrokerState: &raftfsm.SetBrokerState{ID: 2, Epoch: b.Epoch, State: raftfsm.BrokerFenced}}); err != nil {
		t.Fatal(err)
	}
	fencedAt, _ := n.Image()
	for range 5 {
		if _, err := n.Apply(ctx, raftfsm.Command{AllocateProducerIDs: &raftfsm.AllocateProducerIDs{Count: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	now, _ := n.Image()
	reply, err = n.onHeartbeat(ctx, heartbeat{ID: 2, Epoch: b.Epoch, Applied: fencedAt.Index})
	if err != nil || reply.State != raftfsm.BrokerFenced {
		t.Fatalf("heartbeat applied up to %d while the leader is at %d: %+v %v, want still fenced", fencedAt.Index, now.Index, reply, err)
	}
	// The target stays where it was: more metadata since does not hold it
	// back once it reaches that.
	if _, err := n.Apply(ctx, raftfsm.Command{AllocateProducerIDs: &raftfsm.AllocateProducerIDs{Count: 1}}); err != nil {
		t.Fatal(err)
	}
	reply, err = n.onHeartbeat(ctx, heartbeat{ID: 2, Epoch: b.Epoch, Applied: now.Index})
	if err != nil || reply.State != raftfsm.BrokerAlive {
		t.Fatalf("heartbeat caught up to %d: %+v %v, want unfenced", now.Index, reply, err)
	}
}
