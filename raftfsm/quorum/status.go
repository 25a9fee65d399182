package quorum

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
	"github.com/runnel/runnel/raftfsm"
)

// Image returns the current metadata image (immutable: never modify it) and a
// channel closed when a newer image replaces it.
func (n *Node) Image() (*raftfsm.Image, <-chan struct{}) { return n.fsm.Image() }

// WaitReady blocks until the node knows a leader, has applied the log up to
// the leader's commit index when it first reached it (on the leader:
// everything committed, through a barrier), and the cluster has an id. Voters
// and non-voters alike.
func (n *Node) WaitReady(ctx context.Context) error {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	var target uint64
	caughtUp := false
	for {
		if n.isClosed() {
			return raftfsm.ErrClosed
		}
		if !caughtUp {
			caughtUp, target = n.catchUp(ctx, target)
		}
		img, changed := n.Image()
		if caughtUp && img.ClusterID != "" {
			n.tuneTimeouts()
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("raftfsm: wait ready: %w", ctx.Err())
		case <-n.done:
			return raftfsm.ErrClosed
		case <-changed:
		case <-tick.C:
		}
	}
}

// catchUp reports whether this node has applied what was committed when it
// first saw a leader; target is that commit index (0: no leader seen yet).
func (n *Node) catchUp(ctx context.Context, target uint64) (bool, uint64) {
	if n.raft.State() == raft.Leader {
		timeout, err := n.leaderTimeout(ctx)
		return err == nil && n.await(n.raft.Barrier(timeout)) == nil, target
	}
	if target == 0 {
		if target = n.leaderCommitIndex(ctx); target == 0 {
			return false, 0
		}
	}
	return n.raft.AppliedIndex() >= target, target
}

// leaderCommitIndex asks the leader for its commit index (at least 1); 0
// while there is no leader or it does not answer. A follower's own commit
// index is no target: a new node learns it only as its log fills.
func (n *Node) leaderCommitIndex(ctx context.Context) uint64 {
	addr, ok := n.leaderAddr()
	if !ok {
		return 0
	}
	cctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	var st raftfsm.Status
	if err := n.callAddr(cctx, addr, "status", 0, struct{}{}, &st); err != nil || st.Role != "leader" {
		return 0
	}
	return max(st.CommitIndex, 1)
}

// tuneTimeouts lengthens the single-voter timeouts once the configuration
// has several voters (a cluster grown with AddVoter).
func (n *Node) tuneTimeouts() {
	rc := n.raft.ReloadableConfig()
	if n.cfg.ElectionTimeout != 0 || rc.HeartbeatTimeout != singleVoterTimeout {
		return
	}
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return
	}
	voters := 0
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			voters++
		}
	}
	if voters < 2 {
		return
	}
	rc.HeartbeatTimeout, rc.ElectionTimeout = grownTimeout, grownTimeout
	if err := n.raft.ReloadConfig(rc); err != nil {
		n.log.Warn("raftfsm: cannot lengthen raft timeouts", "err", err)
		return
	}
	n.log.Info("raftfsm: several voters, raft timeouts lengthened", "timeout", grownTimeout)
}

// Status reports the local Raft state.
func (n *Node) Status() raftfsm.Status {
	addr, id := n.raft.LeaderWithID()
	s := raftfsm.Status{
		ID:           n.cfg.NodeID,
		Address:      string(n.trans.LocalAddr()),
		Voter:        !n.isNonvoter(),
		Role:         roleName(n.raft.State()),
		Term:         n.raft.CurrentTerm(),
		LeaderID:     parseServerID(id),
		LeaderAddr:   string(addr),
		LastIndex:    n.raft.LastIndex(),
		CommitIndex:  n.raft.CommitIndex(),
		AppliedIndex: n.raft.AppliedIndex(),

		MetadataIndex:  metadataIndex(n),
		CommandVersion: raftfsm.CommandVersion,
	}
	if f := n.raft.GetConfiguration(); f.Error() == nil {
		for _, srv := range f.Configuration().Servers {
			if srv.ID == serverID(n.cfg.NodeID) {
				s.Voter = srv.Suffrage == raft.Voter
			}
			if srv.Suffrage == raft.Voter {
				s.Voters = append(s.Voters, raftfsm.Server{ID: parseServerID(srv.ID), Address: string(srv.Address)})
			}
		}
	}
	return s
}

func roleName(s raft.RaftState) string {
	switch s {
	case raft.Leader:
		return "leader"
	case raft.Candidate:
		return "candidate"
	case raft.Follower:
		return "follower"
	}
	return "shutdown"
}

// metadataIndex is the index of the published metadata image: the FSM
// records its applied index just before it publishes the image, so the
// image's own index is what a reader can rely on.
func metadataIndex(n *Node) uint64 {
	img, _ := n.Image()
	return img.Index
}
