package server_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runnel/runnel/server/servertest"
)

// A cluster whose nodes share --cluster-secret works end to end (raft,
// controller RPC, replication fetches and forwarded HTTP all cross the
// authenticated port), and a node with another secret cannot join.
func TestClusterSecret(t *testing.T) {
	c := servertest.StartCluster(t, servertest.ClusterOptions{Combined: 3,
		Args: append([]string{"--cluster-secret", "e2e-shared-secret"}, fastSessions...)})
	createReplicatedTopic(t, c.Node(1), "auth")
	for _, n := range c.Nodes { // the partition leader is one of them: the others forward
		if _, ok := produceOne(n, "auth", "hello", 15*time.Second); !ok {
			t.Fatalf("acks=all produce through node %s failed:\n%s", n.URL, n.Logs())
		}
	}
	servertest.WaitFor(t, 30*time.Second, "three registered brokers", func() bool {
		v, ok := cluster(c.Node(1))
		return ok && len(v.Brokers) == 3
	})

	// Node 4 dials the same controllers with the secret from a file that
	// holds another one.
	secretFile := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secretFile, []byte("  not-the-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	intruder := servertest.New(t, servertest.Options{NodeID: 4,
		Args: append([]string{"--roles", "broker", "--controllers", controllersArg(t, c.Node(1)),
			"--cluster-secret-file", secretFile}, fastSessions...)})
	intruder.StartNoWait()
	client := &http.Client{Timeout: time.Second}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if resp, err := client.Get(intruder.URL + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Fatalf("node with a wrong secret became ready:\n%s", intruder.Logs())
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	v, ok := cluster(c.Node(1))
	if !ok {
		t.Fatal("GET /v1/cluster failed")
	}
	for _, b := range v.Brokers {
		if b.ID == 4 {
			t.Fatalf("node with a wrong secret registered as a broker: %+v", v.Brokers)
		}
	}
	rejected := false
	for _, n := range c.Nodes {
		rejected = rejected || strings.Contains(n.Logs(), "rejected connection on the raft port")
	}
	if !rejected {
		t.Fatal("no controller logged the rejected connections")
	}
	if _, ok := produceOne(c.Node(2), "auth", "after", 15*time.Second); !ok {
		t.Fatal("the cluster stopped working while a node with a wrong secret knocked")
	}
}

// controllersArg is the --controllers value node n was started with.
func controllersArg(t *testing.T, n *servertest.Node) string {
	t.Helper()
	args := n.Args()
	for i, a := range args[:len(args)-1] {
		if a == "--controllers" {
			return args[i+1]
		}
	}
	t.Fatal("node started without --controllers")
	return ""
}
