package quorum_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/raftfsm/quorum"
)

// Close must return while commands are in flight: hashicorp/raft can shut
// down with an applied-but-unanswered future queued for its FSM goroutine,
// and a waiter on such a future must not hold Close (every SIGTERM runs it).
func TestCloseWithApplysInFlightReturns(t *testing.T) {
	for round := 0; round < 10; round++ {
		n, err := quorum.Open(quorum.Config{NodeID: 1, Dir: t.TempDir(), BindAddr: freeAddr(t)})
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := n.WaitReady(ctx); err != nil {
			t.Fatalf("wait ready: %v", err)
		}
		var wg sync.WaitGroup
		var applied atomic.Int64
		stop := make(chan struct{})
		for w := 0; w < 64; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					_, err := n.Apply(ctx, raftfsm.Command{InitCluster: &raftfsm.InitCluster{ClusterID: fmt.Sprintf("c%d-%d-%d", round, w, i)}})
					if err != nil {
						return
					}
					applied.Add(1)
				}
			}()
		}
		// Close at a different depth of the apply queue each round.
		for deadline := time.Now().Add(30 * time.Second); applied.Load() < int64(10+round*40) && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		closed := make(chan error, 1)
		go func() { closed <- n.Close() }()
		select {
		case <-closed:
		case <-time.After(60 * time.Second):
			t.Fatalf("round %d: Close did not return within 60 s with applies in flight", round)
		}
		close(stop)
		wg.Wait()
		if applied.Load() == 0 {
			t.Fatalf("round %d: no command applied before Close", round)
		}
		cancel()
	}
}

// An active controller that closes (SIGTERM, a rolling restart) hands its
// leadership over first, so the others do not wait out their election
// timeouts. Nodes 2 and 3 have an election timeout of a minute: they stand
// for election on their own only a minute after they last heard from a
// leader; node 1, with the default, leads first. Once it closes, a
// survivor must lead, and take a command, long before that minute (before:
// nobody led until the minute was up).
func TestCloseHandsLeadershipOver(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-node cluster")
	}
	const slow = time.Minute
	q := newQuorum(t, 3, 0, func(c *quorum.Config) {
		if c.NodeID != 1 {
			c.ElectionTimeout = slow
		}
	})
	q.waitReady()
	if lead := q.leader(); lead != 0 {
		t.Fatalf("node %d leads, not node 1 (the only one with a short election timeout): nothing tested", lead+1)
	}
	closed := time.Now()
	q.stop(0)
	waitFor(t, slow/2, "a survivor to lead", func() bool {
		return q.nodes[1].Status().Role == "leader" || q.nodes[2].Status().Role == "leader"
	})
	q.applyOn(1, raftfsm.Command{AllocateProducerIDs: &raftfsm.AllocateProducerIDs{Count: 1}})
	t.Logf("a survivor led and applied %v after the leader began closing", time.Since(closed).Round(time.Millisecond))
}
