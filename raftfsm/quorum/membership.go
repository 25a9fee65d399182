package quorum

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
	"github.com/runnel/runnel/raftfsm"
)

// addVoterLocal adds a voter to the quorum the way KIP-853 does; leader
// only (ErrNotLeader elsewhere). The new server must answer (as the node id
// it claims) before anything changes; it joins as a non-voter, and only once
// it has caught up with the log is it promoted, so a server that is down,
// misaddressed or slow never counts towards the majority. The change is
// refused (ErrQuorumChange) when the quorum after it would lack a majority
// of reachable voters. A server that is already a voter at that address is
// left as it is. ctx bounds the whole change (voterCatchUpTimeout without a
// deadline); a new server that does not catch up in time is removed again.
func (n *Node) addVoterLocal(ctx context.Context, s raftfsm.Server) error {
	if _, err := n.leaderTimeout(ctx); err != nil {
		return err
	}
	if err := checkServer(s); err != nil {
		return err
	}
	members, err := n.members()
	if err != nil {
		return err
	}
	if m, ok := members[serverID(s.ID)]; ok && m.Suffrage == raft.Voter && string(m.Address) == s.Address {
		return nil
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, voterCatchUpTimeout)
		defer cancel()
	}
	if err := n.probeServer(ctx, s); err != nil {
		return err
	}
	if err := n.checkQuorumAfter(ctx, s.ID, true); err != nil {
		return err
	}
	if m, ok := members[serverID(s.ID)]; !ok || m.Suffrage != raft.Voter {
		if err := n.addNonvoterLocal(ctx, s); err != nil {
			return err
		}
		if err := n.waitCaughtUp(ctx, s); err != nil {
			n.undoNonvoter(s.ID)
			return err
		}
	}
	timeout, err := n.leaderTimeout(ctx)
	if err != nil {
		return err
	}
	f := n.raft.AddVoter(serverID(s.ID), raft.ServerAddress(s.Address), 0, timeout)
	if err := f.Error(); err != nil {
		return fmt.Errorf("raftfsm: add voter %d: %w", s.ID, raftError(err))
	}
	n.tuneTimeouts()
	return nil
}

// addNonvoterLocal adds a server that receives the log but does not vote (a
// broker following the metadata); leader only.
func (n *Node) addNonvoterLocal(ctx context.Context, s raftfsm.Server) error {
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

// removeVoterLocal removes a server from the quorum; leader only. Removing
// the last voter, or a voter whose removal leaves fewer reachable voters
// than a majority, is refused (ErrQuorumChange): the change could not
// commit, and the quorum would stay stuck waiting for it.
func (n *Node) removeVoterLocal(ctx context.Context, id int32) error {
	if _, err := n.leaderTimeout(ctx); err != nil {
		return err
	}
	members, err := n.members()
	if err != nil {
		return err
	}
	m, ok := members[serverID(id)]
	if !ok {
		return nil // not a member: nothing to do (a retried removal)
	}
	if m.Suffrage == raft.Voter {
		if err := n.checkQuorumAfter(ctx, id, false); err != nil {
			return err
		}
	}
	timeout, err := n.leaderTimeout(ctx)
	if err != nil {
		return err
	}
	if err := n.raft.RemoveServer(serverID(id), 0, timeout).Error(); err != nil {
		return fmt.Errorf("raftfsm: remove voter %d: %w", id, raftError(err))
	}
	return nil
}

// Snapshot takes a raft snapshot now and trims the log behind it (raft also
// does so by itself past SnapshotThreshold entries). Nothing new to
// snapshot is not an error.
func (n *Node) Snapshot() error {
	if n.isClosed() {
		return raftfsm.ErrClosed
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
		return 0, raftfsm.ErrClosed
	}
	if n.raft.State() != raft.Leader {
		return 0, raftfsm.ErrNotLeader
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
