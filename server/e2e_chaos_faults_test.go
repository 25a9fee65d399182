package server_test

// Chaos scenarios for the faults a process cannot be given from outside
// (issue 20): wall-clock jumps and a slow disk. The nodes run with the
// hidden --test-faults flag and read <data-dir>/test-faults while running
// (server/testfaults.go); the scenario runner and the history checker are
// e2e_chaos_test.go's.

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
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
		// acks=all acknowledgements per second while the disk is slow and
		// while it is fast, in the same run.
		var slowAcks, fastAcks int
		var slowTime, fastTime time.Duration
		mark, markAt := h.ackedCount(), time.Now()
		for sleepCtx(ctx, 3*time.Second) {
			id := pick(h)
			if id == 0 {
				continue
			}
			fastAcks, fastTime = fastAcks+h.ackedCount()-mark, fastTime+time.Since(markAt)
			h.logFault("node %d's fsyncs take %v", id, delay)
			mark, markAt = h.ackedCount(), time.Now()
			setFaults(h.t, h.c.Node(id), 0, delay)
			sleepCtx(context.Background(), hold)
			setFaults(h.t, h.c.Node(id), 0, 0)
			slowAcks, slowTime = slowAcks+h.ackedCount()-mark, slowTime+time.Since(markAt)
			h.logFault("node %d's disk fast again", id)
			mark, markAt = h.ackedCount(), time.Now()
		}
		if slowTime > 0 && fastTime > 0 && fastAcks > 0 {
			slow, fast := float64(slowAcks)/slowTime.Seconds(), float64(fastAcks)/fastTime.Seconds()
			h.t.Logf("acks=all acknowledgements: %.0f/s with the slow disk, %.0f/s without (%.2fx)", slow, fast, slow/fast)
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

// Retention follows the node's own wall clock against the records'
// timestamps, as Kafka's does: a node whose clock jumps 20 min ahead keeps
// what a 30 min retention keeps (while it deletes a 10 min topic's old
// segments in the same pass), and one an hour ahead deletes the 30 min
// topic's sealed segments an hour early. Nothing protects a replica from
// its own clock running ahead; README "Clocks" says so.
func TestClockJumpRetention(t *testing.T) {
	n := servertest.Start(t, servertest.Options{Args: []string{"--test-faults"}})
	c := newAPIClient(t, n)
	for _, tp := range []struct{ name, retention string }{{"keep30m", "1800000"}, {"keep10m", "600000"}} {
		c.json("POST", "/v1/topics", map[string]any{"name": tp.name, "partitions": 1, "replication_factor": 1,
			"configs": map[string]string{"retention.ms": tp.retention, "segment.bytes": "1024"}}, http.StatusCreated, nil)
		for i := range 20 { // records stamped now (CreateTime from the node's clock, no offset yet)
			c.json("POST", "/v1/topics/"+tp.name+"/records?encoding=string", map[string]any{"records": []map[string]any{
				{"value": fmt.Sprintf("%s-%d-%s", tp.name, i, strings.Repeat("x", 200))}}}, http.StatusOK, nil)
		}
	}
	start := func(topic string) int64 {
		ps, ok := describe(n, topic)
		if !ok || len(ps) != 1 {
			t.Fatalf("describe %s: %v", topic, ps)
		}
		return ps[0].StartOffset
	}
	if start("keep30m") != 0 || start("keep10m") != 0 {
		t.Fatal("retention deleted fresh records before any clock jump")
	}
	setFaults(t, n, 20*time.Minute, 0)
	servertest.WaitFor(t, 60*time.Second, "the 10 min topic's old segments deleted at +20 min", func() bool { return start("keep10m") > 0 })
	if got := start("keep30m"); got != 0 {
		t.Fatalf("at +20 min the 30 min topic starts at %d, want 0", got)
	}
	setFaults(t, n, time.Hour, 0)
	servertest.WaitFor(t, 60*time.Second, "the 30 min topic's sealed segments deleted at +1 h", func() bool { return start("keep30m") > 0 })
	ps, _ := describe(n, "keep30m")
	if ps[0].StartOffset >= ps[0].EndOffset {
		t.Fatalf("retention emptied the log (%+v): the active segment is kept", ps[0])
	}
}

// Kafka's default durability (no forced fsync): a slow disk is met only
// where the log fsyncs by itself (segment rolls, checkpoints).
func TestChaosSlowDiskLeaderDefaultFlush(t *testing.T) {
	runChaos(t, chaosScenario{name: "slow disk, no forced fsync: the leader's fsyncs take 200 ms for 10 s", duration: 60 * time.Second,
		args: []string{"--test-faults"}, configs: map[string]string{"segment.bytes": "1048576"},
		fault: slowDiskLoop(p0Leader, 200*time.Millisecond, 10*time.Second)})
}
