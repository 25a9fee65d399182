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
