package raftfsm

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// addVoterLocal adds (or re-addresses) a voter to the quorum; leader only
// (ErrNotLeader elsewhere). ctx's deadline is the raft timeout.
func (n *Node) addVoterLocal(ctx context.Context, s Server) error {
	timeout, err := n.leaderTimeout(ctx)
	if err != nil {
		return err
	}
	f := n.raft.AddVoter(serverID(s.ID), raft.ServerAddress(s.Address), 0, timeout)
	if err := n.await(f); err != nil {
		return fmt.Errorf("raftfsm: add voter %d: %w", s.ID, raftError(err))
	}
	n.tuneTimeouts()
	return nil
}

// addNonvoterLocal adds a server that receives the log but does not vote (a
// broker following the metadata); leader only.
func (n *Node) addNonvoterLocal(ctx context.Context, s Server) error {
	timeout, err := n.leaderTimeout(ctx)
	if err != nil {
		return err
	}
	f := n.raft.AddNonvoter(serverID(s.ID), raft.ServerAddress(s.Address), 0, timeout)
	if err := n.await(f); err != nil {
		return fmt.Errorf("raftfsm: add nonvoter %d: %w", s.ID, raftError(err))
	}
	return nil
}

// removeVoterLocal removes a server from the quorum; leader only.
func (n *Node) removeVoterLocal(ctx context.Context, id int32) error {
	timeout, err := n.leaderTimeout(ctx)
	if err != nil {
		return err
	}
	if err := n.await(n.raft.RemoveServer(serverID(id), 0, timeout)); err != nil {
		return fmt.Errorf("raftfsm: remove voter %d: %w", id, raftError(err))
	}
	return nil
}

// Snapshot takes a raft snapshot now and trims the log behind it (raft also
// does so by itself past SnapshotThreshold entries). Nothing new to
// snapshot is not an error.
func (n *Node) Snapshot() error {
	if n.isClosed() {
		return ErrClosed
	}
	err := n.await(n.raft.Snapshot())
	if err == nil || errors.Is(err, raft.ErrNothingNewToSnapshot) {
		return nil
	}
	return fmt.Errorf("raftfsm: snapshot: %w", raftError(err))
}

// leaderTimeout checks this node can propose and turns ctx into a timeout.
func (n *Node) leaderTimeout(ctx context.Context) (time.Duration, error) {
	if n.isClosed() {
		return 0, ErrClosed
	}
	if n.raft.State() != raft.Leader {
		return 0, ErrNotLeader
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("raftfsm: %w", err)
	}
	if dl, ok := ctx.Deadline(); ok {
		t := time.Until(dl)
		if t <= 0 {
			return 0, fmt.Errorf("raftfsm: %w", context.DeadlineExceeded)
		}
		return t, nil
	}
	return defaultApplyTimeout, nil
}
