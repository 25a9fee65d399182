package quorum

import (
	"context"
	"slices"
	"sync"

	"github.com/runnel/runnel/raftfsm"
)

// Metadata propagation: an admin change is visible on every alive broker
// once the call that made it returns (issue 18). Followers apply the log a
// few milliseconds after the leader; without this wait a client that sent
// CreatePartitions to one broker could ask another for metadata and be
// told the old partition count.

// appliedRequest asks a node to answer once its image holds index.
type appliedRequest struct {
	Index uint64
}

// onWaitApplied serves the "wait_applied" RPC: it returns once this node's
// image holds req.Index, or the error when ctx (the caller's deadline,
// carried by the RPC) ends first.
func (n *Node) onWaitApplied(ctx context.Context, req appliedRequest) (any, error) {
	return nil, n.waitApplied(ctx, req.Index)
}

// WaitBrokersApplied waits until every broker that this node's image shows
// unfenced has applied the metadata log up to index, asking each other
// node once, all in parallel; this node waits for itself. ctx bounds the
// whole wait. It returns the ids of the brokers that did not confirm by
// then (unreachable, paused, or still behind), sorted; nil when all did.
// Safe for concurrent use.
func (n *Node) WaitBrokersApplied(ctx context.Context, index uint64) []int32 {
	img, _ := n.Image()
	var (
		mu     sync.Mutex
		behind []int32
		wg     sync.WaitGroup
	)
	fail := func(id int32) {
		mu.Lock()
		behind = append(behind, id)
		mu.Unlock()
	}
	for id, b := range img.Brokers {
		if b.State == raftfsm.BrokerFenced {
			continue
		}
		if id == n.cfg.NodeID {
			if n.waitApplied(ctx, index) != nil {
				fail(id)
			}
			continue
		}
		addr, err := n.addressOf(id)
		if err != nil {
			fail(id)
			continue
		}
		wg.Add(1)
		if !n.spawn(func() {
			defer wg.Done()
			if n.callAddr(ctx, addr, "wait_applied", 0, appliedRequest{Index: index}, nil) != nil {
				fail(id)
			}
		}) {
			wg.Done()
			fail(id)
		}
	}
	wg.Wait()
	slices.Sort(behind)
	return behind
}
