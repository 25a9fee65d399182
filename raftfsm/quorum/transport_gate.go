package quorum

import (
	"sync"

	"github.com/hashicorp/raft"
)

// gatedTransport is raft's network transport with one addition: heartbeat
// handlers are counted, so Close can wait for the last one before it closes
// the stores.
//
// Why: hashicorp/raft answers heartbeats on the transport's connection
// goroutines (a fast path that bypasses the main loop), and Raft.Shutdown does
// not wait for them. A heartbeat that carried a higher term and was still
// running when the node closed badger made raft's setCurrentTerm panic with
// "DB Closed". After drain, heartbeats are answered with
// ErrTransportShutdown and never reach raft.
type gatedTransport struct {
	*raft.NetworkTransport

	mu       sync.Mutex
	draining bool
	inFlight sync.WaitGroup
}

func newGatedTransport(t *raft.NetworkTransport) *gatedTransport {
	return &gatedTransport{NetworkTransport: t}
}

// SetHeartbeatHandler wraps raft's handler so that drain can wait for it.
func (g *gatedTransport) SetHeartbeatHandler(fn func(rpc raft.RPC)) {
	if fn == nil {
		g.NetworkTransport.SetHeartbeatHandler(nil)
		return
	}
	g.NetworkTransport.SetHeartbeatHandler(func(rpc raft.RPC) {
		if !g.enter() {
			rpc.Respond(nil, raft.ErrTransportShutdown)
			return
		}
		defer g.inFlight.Done()
		fn(rpc)
	})
}

func (g *gatedTransport) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.draining {
		return false
	}
	g.inFlight.Add(1)
	return true
}

// drain refuses new heartbeats and waits for those in flight. Called after
// raft shut down (so a running handler returns promptly) and before the
// stores close.
func (g *gatedTransport) drain() {
	g.mu.Lock()
	g.draining = true
	g.mu.Unlock()
	g.inFlight.Wait()
}
