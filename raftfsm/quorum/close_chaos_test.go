package quorum_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/raftfsm/quorum"
)

// Close never hangs, wherever it lands in a leadership change: a 3-node
// cluster under a steady stream of commands (through every node, so some are
// forwarded) has a node closed at a random moment every round — the leader
// half of the time, so the next round often lands in the election that
// follows; one round in five closes a second node too, losing the quorum —
// and restarted. Every Close must return within closeBound. Afterwards the
// cluster serves commands again and every node holds the same image.
//
// 200 rounds with RUNNEL_CHAOS=1 (make chaos); 25 in make test.
func TestChaosCloseDuringLeadershipChanges(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-node cluster")
	}
	rounds := 25
	if os.Getenv("RUNNEL_CHAOS") == "1" {
		rounds = 200
	}
	const closeBound = 30 * time.Second
	c := newCluster(t, 3)
	c.waitReady()
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 7))
	t.Logf("seed %d", seed)

	// Writers use their own view of the running nodes: the test goroutine
	// replaces c.nodes while they run.
	var running [3]atomic.Pointer[quorum.Node]
	for i, n := range c.nodes {
		running[i].Store(n)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var applied atomic.Int64
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				n := running[(w+i)%3].Load()
				if n == nil {
					time.Sleep(5 * time.Millisecond)
					continue
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_, err := n.Apply(ctx, raftfsm.Command{AllocateProducerIDs: &raftfsm.AllocateProducerIDs{Count: 1}})
				cancel()
				if err == nil {
					applied.Add(1)
				} else if errors.Is(err, raftfsm.ErrClosed) {
					time.Sleep(5 * time.Millisecond)
				}
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()

	var slowest time.Duration
	closeNode := func(round, i int) {
		n := c.nodes[i]
		running[i].Store(nil)
		done := make(chan error, 1)
		start := time.Now()
		go func() { done <- n.Close() }()
		select {
		case err := <-done:
			slowest = max(slowest, time.Since(start))
			if err != nil {
				t.Errorf("round %d: close node %d: %v", round, i+1, err)
			}
		case <-time.After(closeBound):
			t.Fatalf("round %d: Close of node %d did not return within %v", round, i+1, closeBound)
		}
		c.nodes[i] = nil
	}
	for round := 0; round < rounds; round++ {
		victim := rng.IntN(3)
		if rng.IntN(2) == 0 {
			for i, n := range c.nodes {
				if n.Status().Role == "leader" {
					victim = i
				}
			}
		}
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
		closeNode(round, victim)
		down := []int{victim}
		if rng.IntN(5) == 0 { // the quorum goes too
			second := (victim + 1 + rng.IntN(2)) % 3
			time.Sleep(time.Duration(rng.IntN(100)) * time.Millisecond)
			closeNode(round, second)
			down = append(down, second)
		}
		time.Sleep(time.Duration(rng.IntN(200)) * time.Millisecond)
		for _, i := range down {
			c.start(i)
			running[i].Store(c.nodes[i])
		}
	}
	c.waitReady()
	before := applied.Load()
	c.mustApply(raftfsm.Command{AllocateProducerIDs: &raftfsm.AllocateProducerIDs{Count: 1}})
	c.converged()
	t.Logf("%d rounds, %d commands applied during them, slowest Close %v", rounds, before, slowest)
}
