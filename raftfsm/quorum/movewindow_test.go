package quorum_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/raftfsm/quorum"
)

// The active controller keeps at most quorum.MoveWindow of a plan's leader
// moves proposed and not yet applied. It used to propose the whole plan at
// once (about 67 raft entries for a broker leading 1,333,333 partitions):
// a controller closing meanwhile (SIGTERM) handed over only once its
// successor held all of them, and the successor applied them all before
// its first write (SIGTERM failover 0.4 to 5.6 s at 2,000,000 partitions,
// issue 19). Here the moves of a controlled shutdown are one command per
// topic (ShutDownUnbatched), so that a few partitions make many raft
// entries, and a goroutine watches how far the active controller's log
// runs ahead of its state machine meanwhile.
func TestLeaderMovesProposedInAWindow(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-node cluster")
	}
	q := newQuorum(t, 3, 0, nil)
	q.waitReady()
	for i := range 3 {
		q.register(i, "")
	}
	const topics, partitions = 40, 30
	for i := range topics {
		q.applyOn(0, createTopic(fmt.Sprintf("window-%02d", i), partitions, 2))
	}
	lead := q.leader()
	broker := (lead + 1) % 3
	id := q.cfgs[broker].NodeID
	before, _ := q.nodes[lead].Image()

	var ahead atomic.Uint64 // the most entries seen past the applied ones
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if a := q.nodes[lead].LogAhead(); a > ahead.Load() {
				ahead.Store(a)
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := q.nodes[lead].ShutDownUnbatched(ctx, id, before.Brokers[id].Epoch)
	close(stop)
	<-watched
	if err != nil {
		t.Fatal(err)
	}
	// A move command that failed (leadership lost, or a timeout when the
	// disk stalls under load: CI saw it once at load 39) is the
	// controller loop's to retry; every partition must end up moved.
	var after *raftfsm.Image
	var still string
	waitFor(t, time.Minute, "every leadership moved off the broker shutting down", func() bool {
		after, _ = q.nodes[lead].Image()
		still = ""
		for _, tp := range after.Topics.All() {
			for i, p := range tp.Partitions {
				if p.Leader == id && still == "" {
					still = fmt.Sprintf("%s-%d", tp.Name, i)
				}
			}
		}
		return still == ""
	})
	entries := after.Index - before.Index
	if entries < 3*quorum.MoveWindow {
		t.Fatalf("the moves took %d raft entries: too few to see a window of %d", entries, quorum.MoveWindow)
	}
	// The window, and room for an entry of the controller's own beside it
	// (the broker's state, a barrier).
	if got := ahead.Load(); got > quorum.MoveWindow+2 {
		t.Fatalf("the active controller's log ran %d entries ahead of its state machine during %d entries of moves, want at most %d",
			got, entries, quorum.MoveWindow+2)
	}
	t.Logf("%d entries, at most %d ahead", entries, ahead.Load())
}
