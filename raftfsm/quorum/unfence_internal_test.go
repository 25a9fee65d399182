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
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Registered: caught up with its registration, it is unfenced.
	n, b := nodeWithBroker2(ctx, t, Config{})
	defer n.Close()
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
	reply, err := n.onHeartbeat(ctx, heartbeat{ID: 2, Epoch: b.Epoch, Applied: fencedAt.Index})
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

// The controller loop fences a broker whose session lapsed while a
// controlled shutdown's leader moves are being applied (reconcileMu held:
// seconds at millions of partitions, issue 19). It used to wait for them
// at its next look for moves, and fenced nobody meanwhile.
func TestFencingGoesOnDuringLeaderMoves(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, _ := nodeWithBroker2(ctx, t, Config{HeartbeatInterval: 50 * time.Millisecond, SessionTimeout: 2 * time.Second})
	defer n.Close()
	// The leader moves of a controlled shutdown, in progress; broker 2
	// sends no more heartbeats. The loop looks for moves within
	// reconcileEvery ticks (0.25 s), well before the session lapses.
	n.q.reconcileMu.Lock()
	defer n.q.reconcileMu.Unlock() // before Close
	for {
		img, changed := n.Image()
		if img.Brokers[2].State == raftfsm.BrokerFenced {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("broker 2 not fenced within 30 s while leader moves were applied: %s", img.Brokers[2].State)
		case <-changed:
		}
	}
}

// nodeWithBroker2 opens a single node with cfg (its id, directory and
// address filled in), registers broker 2 and unfences it with a heartbeat
// caught up with its registration. The caller closes the node.
func nodeWithBroker2(ctx context.Context, t *testing.T, cfg Config) (*Node, *raftfsm.Broker) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.NodeID, cfg.Dir, cfg.BindAddr = 1, t.TempDir(), l.Addr().String()
	l.Close()
	n, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.WaitReady(ctx); err != nil {
		n.Close()
		t.Fatal(err)
	}
	res, err := n.Apply(ctx, raftfsm.Command{RegisterBroker: &raftfsm.RegisterBroker{ID: 2, IncarnationID: "b2", Heartbeats: true}})
	if err != nil {
		n.Close()
		t.Fatal(err)
	}
	b := res.(*raftfsm.Broker)
	img, _ := n.Image()
	if reply, err := n.onHeartbeat(ctx, heartbeat{ID: 2, Epoch: b.Epoch, Applied: img.Index}); err != nil || reply.State != raftfsm.BrokerAlive {
		n.Close()
		t.Fatalf("first unfence: %+v %v", reply, err)
	}
	return n, b
}
