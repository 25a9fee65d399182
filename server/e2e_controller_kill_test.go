package server_test

import (
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/runnel/runnel/server/servertest"
)

// A kill -9 of the active controller (three real processes): a survivor
// sees its connections end and its port refuse, and stands for election
// at once through the leader watch (raftfsm/quorum/leaderwatch), exactly
// one of them (no split vote); raft's heartbeat timeout is not waited for.
// How long it takes is measured by raftfsm/quorum's
// BenchmarkControllerScale, not asserted here.
func TestControllerKill9StandsAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("three processes")
	}
	c := servertest.StartCluster(t, servertest.ClusterOptions{Combined: 3})
	ctrl := int(leaderOf(t, c.Node(1)))
	c.Node(ctrl).Kill()
	survivor := c.Node(ctrl%3 + 1)
	newLeaderSeenBy(t, survivor, int32(ctrl))
	stood := 0
	var logs []string
	for id := 1; id <= 3; id++ {
		if id == ctrl {
			continue
		}
		l := c.Node(id).Logs()
		stood += strings.Count(l, "standing for election at once")
		logs = append(logs, fmt.Sprintf("node %d:\n%s", id, l))
	}
	if stood != 1 {
		t.Fatalf("survivors stood %d times through the leader watch after node %d was killed, want 1\n%s",
			stood, ctrl, strings.Join(logs, "\n"))
	}
}

// A paused active controller (SIGSTOP) keeps its connections and its
// port accepts: the leader watch leaves it to raft's timeout, which
// elects another controller, and nobody stands through the watch.
func TestControllerPauseLeftToTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("three processes")
	}
	c := servertest.StartCluster(t, servertest.ClusterOptions{Combined: 3})
	ctrl := int(leaderOf(t, c.Node(1)))
	c.Node(ctrl).Signal(syscall.SIGSTOP)
	defer c.Node(ctrl).Signal(syscall.SIGCONT)
	survivor := c.Node(ctrl%3 + 1)
	newLeaderSeenBy(t, survivor, int32(ctrl))
	for id := 1; id <= 3; id++ {
		if l := c.Node(id).Logs(); id != ctrl && strings.Contains(l, "standing for election at once") {
			t.Fatalf("node %d stood through the leader watch while node %d was only paused:\n%s", id, ctrl, l)
		}
	}
}
