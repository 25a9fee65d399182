package quorum

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/raft"
	"github.com/runnel/runnel/raftfsm"
)

// Quorum membership safety (KIP-853's rules, on hashicorp/raft): a new
// voter is first a non-voter that must answer and catch up, and no change
// may leave the quorum without a majority of reachable voters.

const (
	// voterCatchUpTimeout bounds adding a voter when the caller's context
	// has no deadline.
	voterCatchUpTimeout = 30 * time.Second
	// probeTimeout bounds asking one server for its status; probeWindow
	// bounds retrying a new voter that does not answer yet (its process
	// may still be starting).
	probeTimeout = 3 * time.Second
	probeWindow  = 10 * time.Second
	catchUpPoll  = 50 * time.Millisecond
)

// checkServer validates a voter to add: a node id and a dialable address.
func checkServer(s raftfsm.Server) error {
	if s.ID < 0 {
		return fmt.Errorf("%w: controller id %d", raftfsm.ErrInvalidCommand, s.ID)
	}
	host, port, err := net.SplitHostPort(s.Address)
	if err != nil || host == "" || port == "" || len(s.Address) > raftfsm.MaxAddrLen {
		return fmt.Errorf("%w: controller address %.100q is not host:port", raftfsm.ErrInvalidCommand, s.Address)
	}
	return nil
}

// members is the current raft configuration by server id.
func (n *Node) members() (map[raft.ServerID]raft.Server, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, fmt.Errorf("raftfsm: read configuration: %w", raftError(err))
	}
	out := map[raft.ServerID]raft.Server{}
	for _, s := range f.Configuration().Servers {
		out[s.ID] = s
	}
	return out, nil
}

// probeServer asks the server at s.Address for its status: it must answer,
// as node s.ID. The error deliberately wraps no dial sentinel (errUnreachable
// would make a forwarding caller retry it as if the leader were away).
func (n *Node) probeServer(ctx context.Context, s raftfsm.Server) error {
	pctx, cancel := context.WithTimeout(ctx, probeWindow)
	defer cancel()
	var st raftfsm.Status
	var err error
	for {
		if st, err = n.statusAt(pctx, s.Address); err == nil || pctx.Err() != nil {
			break
		}
		select {
		case <-pctx.Done():
		case <-n.done:
			return raftfsm.ErrClosed
		case <-time.After(10 * catchUpPoll):
		}
	}
	if err != nil {
		return fmt.Errorf("%w: controller %d at %s does not answer (%v); start it first, with --roles controller and --controllers naming the current quorum",
			raftfsm.ErrQuorumChange, s.ID, s.Address, err)
	}
	if st.ID != s.ID {
		return fmt.Errorf("%w: %s is node %d, not %d", raftfsm.ErrQuorumChange, s.Address, st.ID, s.ID)
	}
	return nil
}

func (n *Node) statusAt(ctx context.Context, addr string) (raftfsm.Status, error) {
	cctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	var st raftfsm.Status
	err := n.callAddr(cctx, addr, "status", 0, struct{}{}, &st)
	return st, err
}

// checkQuorumAfter refuses a change whose resulting voters would not hold a
// majority of reachable servers: adding id (reachable: probed just before)
// or removing it.
func (n *Node) checkQuorumAfter(ctx context.Context, id int32, adding bool) error {
	reachable, total := 0, 0
	for _, st := range n.ControllerStatuses(ctx) {
		if st.ID == id {
			continue
		}
		total++
		if st.Role != "unreachable" {
			reachable++
		}
	}
	if adding {
		total++
		reachable++
	}
	if total == 0 {
		return fmt.Errorf("%w: controller %d is the last voter", raftfsm.ErrQuorumChange, id)
	}
	if need := total/2 + 1; reachable < need {
		return fmt.Errorf("%w: %d of the %d voters after the change answer, a majority needs %d; bring the others back first",
			raftfsm.ErrQuorumChange, reachable, total, need)
	}
	return nil
}

// waitCaughtUp waits until the server at s.Address follows this leader and
// has applied the log up to this leader's commit index as it was when the
// server was added (a node with a log of its own, say from another
// cluster, does not count as caught up by its index alone).
func (n *Node) waitCaughtUp(ctx context.Context, s raftfsm.Server) error {
	target := n.raft.CommitIndex()
	tick := time.NewTicker(catchUpPoll)
	defer tick.Stop()
	var last raftfsm.Status
	for {
		if st, err := n.statusAt(ctx, s.Address); err == nil {
			last = st
			if st.LeaderID == n.cfg.NodeID && st.AppliedIndex >= target {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: controller %d did not catch up (applied %d of %d) in time; it was not added",
				raftfsm.ErrQuorumChange, s.ID, last.AppliedIndex, target)
		case <-n.done:
			return raftfsm.ErrClosed
		case <-tick.C:
		}
	}
}

// undoNonvoter removes a non-voter that failed to catch up, so a failed
// add leaves the configuration as it was. Best effort: a non-voter never
// counts towards the majority either way.
func (n *Node) undoNonvoter(id int32) {
	if err := n.raft.RemoveServer(serverID(id), 0, probeTimeout).Error(); err != nil {
		n.log.Warn("raftfsm: could not remove a non-voter that did not catch up", "node", id, "err", err)
	}
}
