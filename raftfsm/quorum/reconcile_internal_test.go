package quorum

import (
	"context"
	"testing"
	"time"

	"github.com/runnel/runnel/raftfsm"
)

// A leader move that went stale between the plan and its commit (the
// partition changed meanwhile: an ISR change the dead leader proposed
// before it died, or an entry the new active controller had not applied
// yet when it planned) is planned again at once from the newer image. It
// used to wait for the controller loop's next look at unchanged broker
// states (reconcileEvery ticks, 10 s with the default heartbeat interval):
// after a kill -9 at 100,000 partitions, 1,666 of 99,001 changes were
// skipped so, and the partitions among them stayed led by the fenced
// broker for those 10 s (issue 19).
func TestStaleLeaderMovePlannedAgain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Sessions that do not lapse during the test: the brokers' states are
	// the test's to set.
	n, b2 := nodeWithBroker2(ctx, t, Config{SessionTimeout: time.Hour})
	defer n.Close()
	res, err := n.Apply(ctx, raftfsm.Command{RegisterBroker: &raftfsm.RegisterBroker{ID: 3, IncarnationID: "b3", Heartbeats: true}})
	if err != nil {
		t.Fatal(err)
	}
	b3 := res.(*raftfsm.Broker)
	img, _ := n.Image()
	if reply, err := n.onHeartbeat(ctx, heartbeat{ID: 3, Epoch: b3.Epoch, Applied: img.Index}); err != nil || reply.State != raftfsm.BrokerAlive {
		t.Fatalf("unfence broker 3: %+v %v", reply, err)
	}
	if _, err := n.Apply(ctx, raftfsm.Command{CreateTopic: &raftfsm.CreateTopic{Name: "t", Partitions: 1, ReplicationFactor: 2,
		Assignments: [][]int32{{2, 3}}}}); err != nil {
		t.Fatal(err)
	}
	// The controller loop only tries reconcileMu: held here, the moves
	// are this test's alone.
	n.q.reconcileMu.Lock()
	defer n.q.reconcileMu.Unlock() // before Close
	if _, err := n.Apply(ctx, raftfsm.Command{SetBrokerState: &raftfsm.SetBrokerState{ID: 2, Epoch: b2.Epoch, State: raftfsm.BrokerFenced}}); err != nil {
		t.Fatal(err)
	}
	planned := 0
	n.moveLeaders(ctx, func(img *raftfsm.Image, sick map[int32]bool) []raftfsm.Command {
		cmds := n.planMoves(img, sick)
		planned++
		if planned == 1 {
			// Broker 2's last ISR change, committed after the plan
			// read the partition: the planned move is stale.
			p := img.Topics.Get("t").Partitions[0]
			if _, err := n.Apply(ctx, raftfsm.Command{ChangePartition: &raftfsm.ChangePartition{Topic: "t", Partition: 0,
				LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, Leader: 2, ISR: []int32{2, 3}}}); err != nil {
				t.Fatal(err)
			}
		}
		return cmds
	})
	img, _ = n.Image()
	if p := img.Topics.Get("t").Partitions[0]; p.Leader != 3 {
		t.Fatalf("after the leader moves (planned %d times), t-0 is led by %d (ISR %v), want 3: broker 2 is fenced", planned, p.Leader, p.ISR)
	}
}
