package quorum_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/runnel/runnel/raftfsm"
)

// After a command is applied through the leader, CatchUp on a follower
// returns only once the follower's image holds it, also with many callers
// at once (who share the questions to the leader).
func TestCatchUpSeesWhatTheLeaderApplied(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-node cluster")
	}
	c := newCluster(t, 3)
	c.waitReady()
	for round := range 20 {
		id := c.mustApply(raftfsm.Command{AllocateProducerIDs: &raftfsm.AllocateProducerIDs{Count: 1}}).(int64)
		var wg sync.WaitGroup
		for i, n := range c.nodes {
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					// CatchUp answers ErrNotLeader at once while there is
					// no leader (an election on a loaded machine): ask
					// again; what is checked is that success means caught up.
					err := n.CatchUp(ctx)
					for errors.Is(err, raftfsm.ErrNotLeader) && ctx.Err() == nil {
						time.Sleep(50 * time.Millisecond)
						err = n.CatchUp(ctx)
					}
					if err != nil {
						t.Errorf("round %d: CatchUp on node %d: %v", round, i+1, err)
						return
					}
					if img, _ := n.Image(); img.NextProducerID <= id {
						t.Errorf("round %d: node %d caught up without producer id %d (next %d)", round, i+1, id, img.NextProducerID)
					}
				}()
			}
		}
		wg.Wait()
		if t.Failed() {
			return
		}
	}
}
