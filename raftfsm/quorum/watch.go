package quorum

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/raftfsm/quorum/leaderwatch"
)

// The leader watch (package leaderwatch): a follower whose leader's
// process died stands for election at once, instead of one to three raft
// timeouts later (raftConfig). The stream layer kicks it when a raft
// connection a peer opened ends; it probes the leader's port and, on a
// refusal and no word from the leader for a quarter timeout (raft's
// heartbeats come every tenth to fifth of it), this node sends itself
// raft's TimeoutNow (standNow).

// newWatch builds the node's leader watch for raft timeout timeout.
func (n *Node) newWatch(timeout time.Duration) *leaderwatch.Watch {
	return leaderwatch.New(leaderwatch.Config{
		View:      n.watchView,
		Addr:      func(id string) (string, error) { return n.addressOf(parseServerID(raft.ServerID(id))) },
		LastIndex: n.peerLastIndex,
		Stand:     n.standNow,
		// raft's leader sends heartbeats at random intervals of a tenth to
		// a fifth of the timeout (at most 40 ms at the 200 ms a quorum
		// grown from one voter is moved to, tuneTimeouts).
		Quiet: max(timeout/4, 50*time.Millisecond),
		Log:   n.log,
	})
}

// watchView is the raft state the watch decides on.
func (n *Node) watchView() leaderwatch.View {
	_, leader := n.raft.LeaderWithID()
	v := leaderwatch.View{
		Self:     string(serverID(n.cfg.NodeID)),
		Leader:   string(leader),
		Term:     n.raft.CurrentTerm(),
		Follower: n.raft.State() == raft.Follower && !n.isClosed(),

		LastContact: n.raft.LastContact(),
		LastIndex:   n.raft.LastIndex(),
	}
	if f := n.raft.GetConfiguration(); f.Error() == nil {
		for _, s := range f.Configuration().Servers {
			if s.Suffrage == raft.Voter {
				v.Voters = append(v.Voters, string(s.ID))
			}
		}
	}
	return v
}

// peerLastIndex asks voter id for the last index of its raft log (the
// controller RPC's status).
func (n *Node) peerLastIndex(ctx context.Context, id string) (uint64, error) {
	addr, err := n.addressOf(parseServerID(raft.ServerID(id)))
	if err != nil {
		return 0, err
	}
	var st raftfsm.Status
	if err := n.callAddr(ctx, addr, "status", 0, struct{}{}, &st); err != nil {
		return 0, err
	}
	return st.LastIndex, nil
}

// standNow makes this follower a candidate at once: hashicorp/raft has no
// call for it, but a TimeoutNow RPC (what a leader sends the successor
// it hands leadership to) does, whoever sends it, and the candidate's
// vote requests then carry the leadership-transfer flag, which voters
// that still know the old leader grant (they refuse ordinary ones) and
// which skips the pre-vote round. It travels through this node's own
// transport (a connection to itself) into raft's main loop. A node that
// closes meanwhile at worst raises the term once: the stream layer's
// Close ends the call.
func (n *Node) standNow(ctx context.Context) error {
	if n.isClosed() || ctx.Err() != nil {
		return raftfsm.ErrClosed
	}
	self, addr := serverID(n.cfg.NodeID), n.trans.LocalAddr()
	req := raft.TimeoutNowRequest{RPCHeader: raft.RPCHeader{
		ProtocolVersion: raft.ProtocolVersionMax,
		ID:              []byte(self),
		Addr:            n.trans.EncodePeer(self, addr),
	}}
	var resp raft.TimeoutNowResponse
	if err := n.trans.TimeoutNow(self, addr, &req, &resp); err != nil {
		return fmt.Errorf("raftfsm: timeout-now to self: %w", err)
	}
	return nil
}

// CrashElections is how many elections this node started because its
// leader's process had died (the leader watch), since it opened.
func (n *Node) CrashElections() uint64 { return n.q.watch.Stands() }
