package quorum

import (
	"context"

	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/raftfsm/quorum/leadermoves"
)

// MoveWindow is moveWindow, for the tests of package quorum_test.
const MoveWindow = moveWindow

// LogAhead is how many entries this node's raft log holds past what raft
// handed its state machine.
func (n *Node) LogAhead() uint64 {
	last, applied := n.raft.LastIndex(), n.raft.AppliedIndex()
	if last < applied {
		return 0
	}
	return last - applied
}

// ShutDownUnbatched, on the active controller, marks broker id shutting
// down and moves its leaderships away as a controlled shutdown does, but
// in one command per topic (the plan not batched across topics): many raft
// entries from a few partitions.
func (n *Node) ShutDownUnbatched(ctx context.Context, id int32, epoch int64) error {
	n.q.reconcileMu.Lock()
	defer n.q.reconcileMu.Unlock()
	if _, err := n.applyLocal(ctx, raftfsm.Command{SetBrokerState: &raftfsm.SetBrokerState{ID: id, Epoch: epoch, State: raftfsm.BrokerShuttingDown}}); err != nil {
		return err
	}
	n.moveLeaders(ctx, func(img *raftfsm.Image, sick map[int32]bool) []raftfsm.Command {
		return leadermoves.Plan(img, sick)
	})
	return nil
}
