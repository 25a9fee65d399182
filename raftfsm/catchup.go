package raftfsm

import (
	"context"
	"time"
)

// CatchUp waits until this node's metadata includes every command the
// active controller had applied when CatchUp was called: a change
// acknowledged by any node before that is then visible here (read your
// writes across nodes). The caller bounds the wait with ctx. Without a
// reachable leader it returns ErrNotLeader at once. One status RPC to the
// leader (none on the leader); safe for concurrent use.
//
// The target is the leader's FSM index, not raft's applied index: raft
// counts an entry applied once it is handed to the FSM, before the image
// holds it, and the FSM skips entries that are not commands.
func (n *Node) CatchUp(ctx context.Context) error {
	if n.isLeader() {
		return nil // an acknowledged change was applied here first
	}
	target, ok := n.leaderMetadataIndex(ctx)
	if !ok {
		return ErrNotLeader
	}
	for n.fsm.appliedIndex() < target {
		_, changed := n.Image()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-n.done:
			return ErrClosed
		case <-changed:
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}

// leaderMetadataIndex asks the leader for the last command it applied.
func (n *Node) leaderMetadataIndex(ctx context.Context) (uint64, bool) {
	addr, ok := n.leaderAddr()
	if !ok {
		return 0, false
	}
	cctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	var st Status
	if err := n.callAddr(cctx, addr, "status", 0, struct{}{}, &st); err != nil || st.Role != "leader" {
		return 0, false
	}
	return st.MetadataIndex, true
}
