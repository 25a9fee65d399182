package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/server/servertest"
)

// Short broker sessions so fencing shows within a test's patience.
var fastSessions = []string{"--broker-heartbeat-interval", "200ms", "--broker-session-timeout", "2s"}

// clusterView is GET /v1/cluster (api.Cluster: the one set of wire types).
type clusterView = api.Cluster

// cluster fetches GET /v1/cluster without failing the test on errors.
func cluster(n *servertest.Node) (clusterView, bool) {
	var v clusterView
	client := &http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get(n.URL + "/v1/cluster")
	if err != nil {
		return v, false
	}
	defer resp.Body.Close()
	return v, resp.StatusCode == 200 && json.NewDecoder(resp.Body).Decode(&v) == nil
}

func brokerState(v clusterView, id int32) (string, int64) {
	for _, b := range v.Brokers {
		if b.ID == id {
			return b.State, b.Epoch
		}
	}
	return "", 0
}

// createTopic posts a topic and reports the status.
func createTopic(n *servertest.Node, name string, partitions, rf int) int {
	client := &http.Client{Timeout: 15 * time.Second}
	resp, err := client.Post(n.URL+"/v1/topics", "application/json",
		strings.NewReader(fmt.Sprintf(`{"name":%q,"partitions":%d,"replication_factor":%d}`, name, partitions, rf)))
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// digestsAgree waits until every listed node reports the same metadata digest.
func digestsAgree(t *testing.T, nodes ...*servertest.Node) {
	t.Helper()
	servertest.WaitFor(t, 30*time.Second, "equal metadata digests", func() bool {
		first := ""
		for _, n := range nodes {
			v, ok := cluster(n)
			if !ok || v.Node.MetadataDigest == "" {
				return false
			}
			if first == "" {
				first = v.Node.MetadataDigest
			} else if v.Node.MetadataDigest != first {
				return false
			}
		}
		return true
	})
}

func leaderOf(t *testing.T, nodes ...*servertest.Node) int32 {
	t.Helper()
	var id int32 = -1
	servertest.WaitFor(t, 30*time.Second, "a controller leader", func() bool {
		for _, n := range nodes {
			if v, ok := cluster(n); ok && v.LeaderID > 0 {
				id = v.LeaderID
				return true
			}
		}
		return false
	})
	return id
}

// newLeaderSeenBy waits until n reports an active controller other than
// old, and returns it.
func newLeaderSeenBy(t *testing.T, n *servertest.Node, old int32) int32 {
	t.Helper()
	var id int32
	servertest.WaitFor(t, 30*time.Second, "a new controller leader", func() bool {
		v, ok := cluster(n)
		id = v.LeaderID
		return ok && id > 0 && id != old
	})
	return id
}

func without(nodes []*servertest.Node, skip *servertest.Node) []*servertest.Node {
	var out []*servertest.Node
	for _, n := range nodes {
		if n != skip {
			out = append(out, n)
		}
	}
	return out
}

func testLeaderFailover(t *testing.T, c *servertest.Cluster, voters int) {
	all := c.Nodes
	leader := leaderOf(t, all...)
	// Writes through any node reach the active controller.
	for i, n := range all {
		if code := createTopic(n, fmt.Sprintf("before-%d", i), 1, 1); code != 201 {
			t.Fatalf("create topic through node %d: status %d", i+1, code)
		}
	}
	digestsAgree(t, all...)

	killed := c.Node(int(leader))
	killed.Kill()
	rest := without(all, killed)
	start := time.Now()
	newLeaderSeenBy(t, rest[0], leader)
	for i, n := range rest {
		name := fmt.Sprintf("after-%d", i)
		servertest.WaitFor(t, 30*time.Second, "topic creation after failover", func() bool {
			code := createTopic(n, name, 1, 1)
			return code == 201 || code == 409
		})
	}
	t.Logf("controller failover: writes accepted again %v after kill -9 of leader %d", time.Since(start).Round(time.Millisecond), leader)
	digestsAgree(t, rest...)

	killed.Start()
	digestsAgree(t, all...)
}

func TestQuorumThreeCombinedNodes(t *testing.T) {
	c := servertest.StartCluster(t, servertest.ClusterOptions{Combined: 3, Args: fastSessions})
	testLeaderFailover(t, c, 3)
}

func TestQuorumDedicatedControllersAndBrokers(t *testing.T) {
	c := servertest.StartCluster(t, servertest.ClusterOptions{Controllers: 3, Brokers: 2, Args: fastSessions})
	v, _ := cluster(c.Node(4))
	if len(v.Controllers) != 3 || len(v.Brokers) != 2 {
		t.Fatalf("cluster view from a broker: %+v", v)
	}
	testLeaderFailover(t, c, 3)
}

// A broker killed with -9 is fenced within the session timeout; restarted,
// it registers with a new epoch and is unfenced.
func TestBrokerFencedAndUnfenced(t *testing.T) {
	c := servertest.StartCluster(t, servertest.ClusterOptions{Controllers: 1, Brokers: 2, Args: fastSessions})
	ctrl, broker := c.Node(1), c.Node(3)
	v, _ := cluster(ctrl)
	_, epoch := brokerState(v, 3)
	broker.Kill()
	servertest.WaitFor(t, 30*time.Second, "broker 3 fenced", func() bool {
		v, ok := cluster(ctrl)
		s, _ := brokerState(v, 3)
		return ok && s == "fenced"
	})
	broker.Start()
	servertest.WaitFor(t, 30*time.Second, "broker 3 unfenced with a new epoch", func() bool {
		v, ok := cluster(ctrl)
		s, e := brokerState(v, 3)
		return ok && s == "alive" && e > epoch
	})
}

// A controller cut off from the others accepts no metadata writes; the
// majority keeps serving.
func TestQuorumMinorityAcceptsNoWrites(t *testing.T) {
	c := servertest.StartCluster(t, servertest.ClusterOptions{Combined: 3, Proxied: true, Args: fastSessions})
	leader := leaderOf(t, c.Nodes...)
	minority := c.Node(int(leader))
	c.Isolate(int(leader))
	majority := without(c.Nodes, minority)
	servertest.WaitFor(t, 30*time.Second, "the majority elects a new leader and accepts writes", func() bool {
		return createTopic(majority[0], "majority", 1, 1) == 201
	})
	if code := createTopic(minority, "minority", 1, 1); code == 201 {
		t.Fatalf("the isolated node accepted a metadata write")
	}
	c.Heal(int(leader))
	digestsAgree(t, c.Nodes...)
	if v, ok := cluster(minority); !ok || v.Node == nil || v.Node.MetadataDigest == "" {
		t.Fatal("healed node reports no digest")
	}
}

// Controllers join and leave the quorum through the admin API while the
// cluster serves.
func TestQuorumMembershipChanges(t *testing.T) {
	c := servertest.StartCluster(t, servertest.ClusterOptions{Controllers: 3, Brokers: 1, Args: fastSessions})
	var ctrls []string
	for id := 1; id <= 3; id++ {
		ctrls = append(ctrls, fmt.Sprintf("%d@%s", id, c.Node(id).RaftAddr))
	}
	// A new controller starts knowing the current quorum; it waits until added.
	joiner := servertest.New(t, servertest.Options{NodeID: 5, Args: append([]string{
		"--roles", "controller", "--controllers", strings.Join(ctrls, ",")}, fastSessions...)})
	joiner.StartNoWait()
	api := newAPIClient(t, c.Node(4))
	var after clusterView
	api.json("POST", "/v1/cluster/controllers", map[string]any{"id": 5, "address": joiner.RaftAddr}, 200, &after)
	joiner.WaitReady(30 * time.Second)
	servertest.WaitFor(t, 30*time.Second, "four controllers, the new one following", func() bool {
		v, ok := cluster(joiner)
		if !ok || len(v.Controllers) != 4 {
			return false
		}
		for _, ctl := range v.Controllers {
			if ctl.Role != "leader" && ctl.Role != "follower" {
				return false
			}
		}
		return true
	})
	digestsAgree(t, append(c.Nodes, joiner)...)

	// Controller 1 leaves, then dies: {2,3,5} still form a majority of three.
	api.json("DELETE", "/v1/cluster/controllers/1", nil, 200, &after)
	c.Node(1).Kill()
	servertest.WaitFor(t, 30*time.Second, "writes after controller 1 left", func() bool {
		return createTopic(c.Node(4), "after-membership-change", 1, 1) == 201
	})
	v, _ := cluster(joiner)
	if len(v.Controllers) != 3 {
		t.Fatalf("controllers after removing 1: %+v", v.Controllers)
	}
}
