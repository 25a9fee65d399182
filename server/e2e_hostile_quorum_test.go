package server_test

import (
	"net/http"
	"strconv"
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
