package server_test

import (
	"strings"
	"testing"
	"time"

	"github.com/runnel/runnel/server/servertest"
)

// --controller-election-timeout reaches every controller's raft, and a
// cluster running a short one elects a new active controller after a
// kill -9 of the old one and takes metadata writes again (no timing
// asserted: BenchmarkControllerScale measures failover against it).
func TestControllerElectionTimeoutFlag(t *testing.T) {
	c := servertest.StartCluster(t, servertest.ClusterOptions{Combined: 3,
		Args: []string{"--controller-election-timeout", "300ms"}})
	for i, n := range c.Nodes {
		if !strings.Contains(n.Logs(), "election_timeout=300ms") {
			t.Fatalf("node %d did not start raft with the flag's timeout:\n%s", i+1, n.Logs())
		}
	}
	old := leaderOf(t, c.Nodes...)
	c.Node(int(old)).Kill()
	alive := without(c.Nodes, c.Node(int(old)))
	// Liveness only: on a machine loaded 20 times over (CI beside other
	// work) elections at 300 ms can repeat before one leader holds.
	servertest.WaitFor(t, 90*time.Second, "a metadata write after the active controller's kill", func() bool {
		return createTopic(alive[0], "after-failover", 1, 1) == 201
	})
	if now := leaderOf(t, alive...); now == old {
		t.Fatalf("controller %d still reported active after its kill", old)
	}
}
