package quorum

import (
	"context"
	"sync"
	"time"

	"github.com/runnel/runnel/raftfsm"
)

// CatchUp waits until this node's metadata includes every command the
// active controller had applied when CatchUp was called: a change
// acknowledged by any node before that is then visible here (read your
// writes across nodes). The caller bounds the wait with ctx. Without a
// reachable leader it returns ErrNotLeader at once. One status RPC to the
// leader (none on the leader); safe for concurrent use.
//
// The target is the index of the leader's published image, not raft's
// applied index: raft counts an entry applied once it is handed to the FSM,
// before the image holds it, and the FSM skips entries that are not
// commands. Here too the image's index is compared, not the FSM's counter,
// which is set just before the image is published.
func (n *Node) CatchUp(ctx context.Context) error {
	if n.isLeader() {
		return nil // an acknowledged change was applied here first
	}
	target, ok := n.sharedLeaderMetadataIndex(ctx)
	if !ok {
		return raftfsm.ErrNotLeader
	}
	for {
		img, changed := n.Image()
		if img.Index >= target {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-n.done:
			return raftfsm.ErrClosed
		case <-changed:
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// leaderIndexCalls coalesces CatchUp's questions to the leader: many
// callers at once (a client asking for unknown topics in a loop) cost one
// status RPC in flight at a time, not one each. A caller may only use an
// answer to a question asked after it arrived, so callers arriving while
// one is in flight share the next one. The runner goroutine exits when no
// one waits; Close waits for it (spawn).
type leaderIndexCalls struct {
	mu      sync.Mutex
	running bool
	next    *leaderIndexCall // asked once the running one is answered
}

type leaderIndexCall struct {
	done  chan struct{} // closed when index and ok are set
	index uint64
	ok    bool
}

// sharedLeaderMetadataIndex is leaderMetadataIndex asked after the call,
// shared with concurrent callers.
func (n *Node) sharedLeaderMetadataIndex(ctx context.Context) (uint64, bool) {
	c := &n.leaderIndex
	c.mu.Lock()
	call := c.next
	if call == nil {
		call = &leaderIndexCall{done: make(chan struct{})}
		c.next = call
	}
	if !c.running {
		if c.running = n.spawn(func() { n.answerLeaderIndexCalls() }); !c.running {
			c.next = nil
			c.mu.Unlock()
			return 0, false // closing
		}
	}
	c.mu.Unlock()
	select {
	case <-call.done:
		return call.index, call.ok
	case <-ctx.Done():
		return 0, false
	}
}

// answerLeaderIndexCalls asks the leader for each pending call in turn.
func (n *Node) answerLeaderIndexCalls() {
	c := &n.leaderIndex
	for {
		c.mu.Lock()
		call := c.next
		c.next = nil
		if call == nil {
			c.running = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		parent := n.q.ctx
		if parent == nil {
			parent = context.Background()
		}
		call.index, call.ok = n.leaderMetadataIndex(parent)
		close(call.done)
	}
}

// leaderMetadataIndex asks the leader for the last command it applied.
func (n *Node) leaderMetadataIndex(ctx context.Context) (uint64, bool) {
	addr, ok := n.leaderAddr()
	if !ok {
		return 0, false
	}
	cctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	var st raftfsm.Status
	if err := n.callAddr(cctx, addr, "status", 0, struct{}{}, &st); err != nil || st.Role != "leader" {
		return 0, false
	}
	return st.MetadataIndex, true
}
