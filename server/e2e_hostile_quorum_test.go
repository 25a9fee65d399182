package server_test

import (
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/runnel/runnel/server/servertest"
)

// Adding a controller that does not answer used to commit a two-voter
// configuration on a single node: writes then failed (503), the undoing
// DELETE hung, and the node never became ready again after a restart
// (issue 12, item 10). Now it is refused before anything changes.
func TestHostileAddUnreachableController(t *testing.T) {
	n := servertest.Start(t, servertest.Options{})
	api := newAPIClient(t, n)
	start := time.Now()
	api.problem("POST", "/v1/cluster/controllers", "application/json",
		[]byte(`{"id":7,"address":"127.0.0.1:1"}`), 409, "quorum-change-refused")
	t.Logf("refused in %v", time.Since(start).Round(time.Millisecond))
	var v clusterView
	api.json("GET", "/v1/cluster", nil, 200, &v)
	if len(v.Controllers) != 1 {
		t.Fatalf("controllers after a refused add: %+v", v.Controllers)
	}
	if code := createTopic(n, "still-writable", 1, 1); code != 201 {
		t.Fatalf("create topic after the refused add: %d", code)
	}
	// Removing a server that is not a member is a no-op, and answers.
	api.json("DELETE", "/v1/cluster/controllers/7", nil, 200, &v)
	// The last voter cannot be removed.
	api.problem("DELETE", "/v1/cluster/controllers/1", "", nil, 409, "quorum-change-refused")
	// A live address answering as another node id is not that controller.
	api.problem("POST", "/v1/cluster/controllers", "application/json",
		[]byte(`{"id":7,"address":"`+n.RaftAddr+`"}`), 409, "quorum-change-refused")
	// Garbage addresses are a bad request.
	api.problem("POST", "/v1/cluster/controllers", "application/json",
		[]byte(`{"id":8,"address":"no-port"}`), 400, "invalid-request")

	n.Stop()
	n.Start() // used to fail: "wait for the metadata quorum: context deadline exceeded"
	if code := createTopic(n, "after-restart", 1, 1); code != 201 {
		t.Fatalf("create topic after restart: %d", code)
	}
}

// A change that would leave fewer reachable voters than a majority is
// refused: with one of three controllers down, removing a live one would
// leave one of two answering.
func TestHostileRemoveControllerThatLosesQuorum(t *testing.T) {
	c := servertest.StartCluster(t, servertest.ClusterOptions{Combined: 3, Args: fastSessions})
	leader := leaderOf(t, c.Nodes...)
	down := 1 + int(leader)%3 // any node but the leader
	live := 1 + down%3
	if live == int(leader) {
		live = 1 + live%3
	}
	c.Node(down).Kill()
	api := newAPIClient(t, c.Node(int(leader)))
	api.problem("DELETE", "/v1/cluster/controllers/"+strconv.Itoa(live), "", nil, 409, "quorum-change-refused")
	// Unreachable new voters are refused on a three-node quorum too.
	api.problem("POST", "/v1/cluster/controllers", "application/json",
		[]byte(`{"id":9,"address":"127.0.0.1:1"}`), 409, "quorum-change-refused")
	servertest.WaitFor(t, 30*time.Second, "writes with two of three controllers", func() bool {
		return createTopic(c.Node(int(leader)), "two-of-three", 1, 1) == 201
	})
	// Removing the dead one keeps a majority (two of two answer).
	api.json("DELETE", "/v1/cluster/controllers/"+strconv.Itoa(down), nil, 200, nil)
	resp, err := http.Get(c.Node(live).URL + "/v1/cluster")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

// The documented way back from a lost quorum: two of three controllers are
// gone for good; the survivor, stopped, gets a new voter set of itself with
// `runnel recover-quorum`, starts, keeps its metadata and takes writes.
func TestQuorumRecoveredAfterMajorityLost(t *testing.T) {
	c := servertest.StartCluster(t, servertest.ClusterOptions{Combined: 3, Args: fastSessions})
	if code := createTopic(c.Node(1), "before-loss", 2, 3); code != 201 {
		t.Fatalf("create topic: %d", code)
	}
	digestsAgree(t, c.Nodes...)
	c.Node(2).Kill()
	c.Node(3).Kill()
	survivor := c.Node(1)
	survivor.Stop()
	if out, err := exec.Command(servertest.Binary(t), "recover-quorum", "--data-dir", survivor.DataDir,
		"--node-id", "1", "--controllers", "1@"+survivor.RaftAddr).CombinedOutput(); err != nil {
		t.Fatalf("recover-quorum: %v\n%s", err, out)
	}
	survivor.Start()
	var v clusterView
	api := newAPIClient(t, survivor)
	api.json("GET", "/v1/cluster", nil, 200, &v)
	if len(v.Controllers) != 1 || v.LeaderID != 1 {
		t.Fatalf("after recovery: %+v", v)
	}
	var td topicDetail
	api.json("GET", "/v1/topics/before-loss", nil, 200, &td)
	if len(td.Partitions) != 2 {
		t.Fatalf("topic before the loss: %d partitions", len(td.Partitions))
	}
	servertest.WaitFor(t, 30*time.Second, "metadata writes after recovery", func() bool {
		return createTopic(survivor, "after-recovery", 1, 1) == 201
	})
}

// recover-quorum refuses a running node (its stores are locked) and a voter
// set without the node itself.
func TestRecoverQuorumRefusals(t *testing.T) {
	n := servertest.Start(t, servertest.Options{})
	for _, args := range [][]string{
		{"--node-id", "1", "--controllers", "1@" + n.RaftAddr},  // running
		{"--node-id", "1", "--controllers", "2@127.0.0.1:9999"}, // not among the voters
	} {
		out, err := exec.Command(servertest.Binary(t), append([]string{"recover-quorum", "--data-dir", n.DataDir}, args...)...).CombinedOutput()
		if err == nil {
			t.Fatalf("recover-quorum %v succeeded:\n%s", args, out)
		}
		t.Logf("refused: %s", strings.TrimSpace(string(out)))
	}
	if code := createTopic(n, "unharmed", 1, 1); code != 201 {
		t.Fatalf("node harmed by a refused recovery: %d", code)
	}
}
