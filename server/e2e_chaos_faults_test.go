package server_test

// Chaos scenarios for the faults a process cannot be given from outside
// (issue 20): wall-clock jumps and a slow disk. The nodes run with the
// hidden --test-faults flag and read <data-dir>/test-faults while running
// (server/testfaults.go); the scenario runner and the history checker are
// e2e_chaos_test.go's.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/runnel/runnel/server"
	"github.com/runnel/runnel/server/servertest"
)

// setFaults rewrites node n's faults file (a rename, so the node never
// reads half of it).
func setFaults(t *testing.T, n *servertest.Node, clockOffset, fsyncDelay time.Duration) {
	t.Helper()
	path := filepath.Join(n.DataDir, server.TestFaultsFile)
	body := fmt.Sprintf("clock-offset %s\nfsync-delay %s\n", clockOffset, fsyncDelay)
	if err := os.WriteFile(path+".tmp", []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

// clockJumpLoop moves one node's wall clock +1 h, then -1 h, then back,
// each for hold; the node is the partition-0 leader and the active
// controller in turn.
func clockJumpLoop(hold time.Duration) func(context.Context, *chaosHarness) {
	return func(ctx context.Context, h *chaosHarness) {
		picks := []func(*chaosHarness) int{p0Leader, activeController}
		for i := 0; sleepCtx(ctx, 2*time.Second); i++ {
			id := picks[i%len(picks)](h)
			if id == 0 {
				continue
			}
			n := h.c.Node(id)
			for _, off := range []time.Duration{time.Hour, -time.Hour, 0} {
				h.logFault("node %d's clock at %+v", id, off)
				setFaults(h.t, n, off, 0)
				if off != 0 {
					sleepCtx(context.Background(), hold)
				}
			}
		}
	}
}

// The wall clock of one node jumps an hour forward and back while it leads
// or controls. Records are stamped by the leader (LogAppendTime), so the
// log holds timestamps an hour ahead and behind; retention is 3 h and
// segments are small, so a node that aged segments by its own skewed clock
// against timestamps from another skewed clock (2 h apart at most) still
// keeps everything: the checker finds every acknowledged record. Leases,
// sessions and raft timers use the monotonic clock and do not notice.
func TestChaosClockJump(t *testing.T) {
	runChaos(t, chaosScenario{name: "one node's clock jumps +1 h / -1 h (leader, controller)", duration: 60 * time.Second, short: 10 * time.Second,
		args:    []string{"--test-faults"},
		configs: map[string]string{"message.timestamp.type": "LogAppendTime", "retention.ms": "10800000", "segment.bytes": "1048576"},
		fault:   clockJumpLoop(4 * time.Second)})
}

// slowDiskLoop makes every partition fsync of one node take delay, for
// hold at a time, then lets the disk be fast for a while. pick chooses the
// node (a follower of partition 0, or its leader).
func slowDiskLoop(pick func(*chaosHarness) int, delay, hold time.Duration) func(context.Context, *chaosHarness) {
	return func(ctx context.Context, h *chaosHarness) {
		for sleepCtx(ctx, 3*time.Second) {
			id := pick(h)
			if id == 0 {
				continue
			}
			h.logFault("node %d's fsyncs take %v", id, delay)
			setFaults(h.t, h.c.Node(id), 0, delay)
			sleepCtx(context.Background(), hold)
			h.logFault("node %d's disk fast again", id)
			setFaults(h.t, h.c.Node(id), 0, 0)
		}
	}
}

// p0Follower is a node that follows partition 0 (not its leader).
func p0Follower(h *chaosHarness) int {
	leader := h.leaderOf(0)
	if leader == 0 {
		return 0
	}
	return leader%3 + 1
}

// flush.messages=1: every append is fsynced before it is acknowledged, on
// the leader and on each follower before it fetches on, so a slow disk is
// on the acknowledgement path.
var slowDiskConfigs = map[string]string{"flush.messages": "1", "segment.bytes": "1048576"}

func TestChaosSlowDiskFollower(t *testing.T) {
	runChaos(t, chaosScenario{name: "slow disk: a follower's fsyncs take 200 ms for 10 s", duration: 60 * time.Second,
		args: []string{"--test-faults"}, configs: slowDiskConfigs,
		fault: slowDiskLoop(p0Follower, 200*time.Millisecond, 10*time.Second)})
}

func TestChaosSlowDiskLeader(t *testing.T) {
	runChaos(t, chaosScenario{name: "slow disk: the leader's fsyncs take 200 ms for 10 s", duration: 60 * time.Second,
		args: []string{"--test-faults"}, configs: slowDiskConfigs,
		fault: slowDiskLoop(p0Leader, 200*time.Millisecond, 10*time.Second)})
}
