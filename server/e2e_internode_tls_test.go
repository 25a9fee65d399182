package server_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/server/servertest"
)

// mtlsArgs gives node id its certificate from `runnel certs create`.
func mtlsArgs(certs string) func(id int) []string {
	return func(id int) []string {
		return []string{"--cluster-ca-file", filepath.Join(certs, "ca.pem"),
			"--node-cert-file", filepath.Join(certs, fmt.Sprintf("node-%d.pem", id)),
			"--node-key-file", filepath.Join(certs, fmt.Sprintf("node-%d-key.pem", id))}
	}
}

// The replication guarantee holds over inter-node mTLS: kill -9 the leader
// while acks=all producers run, nothing acknowledged is lost and the
// replicas stay byte-identical.
func TestReplicationSurvivesLeaderKillsMTLS(t *testing.T) {
	certs := makeCerts(t, "3")
	testReplicationSurvivesLeaderKills(t, servertest.ClusterOptions{Combined: 3, NodeArgs: mtlsArgs(certs),
		Args: append(fastSessions, "--replica-lag-time-max", "3s")})
}

// Controller failover over inter-node mTLS.
func TestQuorumThreeCombinedNodesMTLS(t *testing.T) {
	certs := makeCerts(t, "3")
	c := servertest.StartCluster(t, servertest.ClusterOptions{Combined: 3, NodeArgs: mtlsArgs(certs), Args: fastSessions})
	if !strings.Contains(c.Node(1).Logs(), "inter-node mutual TLS") {
		t.Fatalf("node 1 does not say it runs inter-node TLS:\n%s", c.Node(1).Logs())
	}
	testLeaderFailover(t, c, 3)
}

// A stranger on the raft port gets nothing: a forged controller RPC
// (CreateTopic) and forged Raft traffic (AppendEntries from a fake leader
// "666" with a higher term) are refused before any handler sees them. The
// same forgeries do work against a node without inter-node authentication
// (checked first, so the test shows they are real), which is why a node
// whose raft port other machines can reach refuses to run that way.
func TestInterNodePortRefusesStrangers(t *testing.T) {
	open := servertest.Start(t, servertest.Options{})
	oc := newAPIClient(t, open)
	before := clusterTerm(t, oc)
	if !forgeCreateTopic(t, open.RaftAddr, "forged-open") {
		t.Fatal("control: the forged RPC was not answered by a node without authentication")
	}
	oc.json("GET", "/v1/topics/forged-open", nil, 200, nil)
	forgeRaftHeartbeat(t, open.RaftAddr, before+5)
	servertest.WaitFor(t, 30*time.Second, "control: the forged term to be adopted", func() bool {
		return clusterTerm(t, oc) >= before+5
	})

	certs := makeCerts(t, "1")
	n := servertest.Start(t, servertest.Options{Args: mtlsArgs(certs)(1)})
	c := newAPIClient(t, n)
	before = clusterTerm(t, c)
	if forgeCreateTopic(t, n.RaftAddr, "forged-tls") {
		t.Fatal("a forged RPC was answered by a node with inter-node TLS")
	}
	forgeRaftHeartbeat(t, n.RaftAddr, before+5)
	if after := clusterTerm(t, c); after != before {
		t.Fatalf("raft term moved from %d to %d after forged traffic", before, after)
	}
	c.problem("GET", "/v1/topics/forged-tls", "", nil, 404, "")
	if !strings.Contains(n.Logs(), "rejected connection on the raft port") {
		t.Fatalf("the refused connections were not logged:\n%s", n.Logs())
	}
}

// A node whose raft port other machines can reach refuses to start without
// inter-node authentication and says which flags to add.
func TestReachableRaftPortNeedsAuthentication(t *testing.T) {
	addr := servertest.FreeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	n := servertest.New(t, servertest.Options{RaftAddr: "0.0.0.0:" + port})
	n.StartNoWait()
	servertest.WaitFor(t, 30*time.Second, "the node to refuse to start", func() bool { return exitedLog(n) })
	logs := n.Logs()
	for _, want := range []string{"--cluster-ca-file", "--node-cert-file", "--cluster-secret-file"} {
		if !strings.Contains(logs, want) {
			t.Fatalf("refusal does not name %s:\n%s", want, logs)
		}
	}
}

func exitedLog(n *servertest.Node) bool {
	return strings.Contains(n.Logs(), "refusing unauthenticated inter-node traffic")
}

func clusterTerm(t *testing.T, c *apiClient) uint64 {
	t.Helper()
	var v api.Cluster
	c.json("GET", "/v1/cluster", nil, 200, &v)
	if len(v.Controllers) == 0 {
		t.Fatal("no controllers in /v1/cluster")
	}
	return v.Controllers[0].Term
}

// forgeCreateTopic speaks the controller RPC ('C', a length-prefixed JSON
// frame) as a stranger would; true when the node answered it.
func forgeCreateTopic(t *testing.T, raftAddr, name string) bool {
	t.Helper()
	conn, err := net.DialTimeout("tcp", raftAddr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body, _ := json.Marshal(map[string]any{"Version": 1, "CreateTopic": map[string]any{"Name": name, "Partitions": 1, "ReplicationFactor": 1}})
	req, _ := json.Marshal(map[string]any{"v": 1, "m": "apply", "timeout_ms": 5000, "body": json.RawMessage(body)})
	frame := binary.BigEndian.AppendUint32([]byte{'C'}, uint32(len(req)))
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write(append(frame, req...)); err != nil {
		return false
	}
	var hdr [4]byte
	if _, err := io.ReadFull(conn, hdr[:]); err != nil {
		return false
	}
	resp := make([]byte, binary.BigEndian.Uint32(hdr[:]))
	if _, err := io.ReadFull(conn, resp); err != nil {
		return false
	}
	return !bytes.Contains(resp, []byte(`"code"`))
}

// forgeRaftHeartbeat sends a real hashicorp/raft AppendEntries (through
// raft's own transport, after the 'R' byte) from a fake leader with term.
func forgeRaftHeartbeat(t *testing.T, raftAddr string, term uint64) {
	t.Helper()
	tr := raft.NewNetworkTransport(&forgerStream{}, 1, 5*time.Second, io.Discard)
	defer tr.Close()
	req := &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("666"), Addr: []byte("127.0.0.1:1")},
		Term:      term,
	}
	var resp raft.AppendEntriesResponse
	_ = tr.AppendEntries("1", raft.ServerAddress(raftAddr), req, &resp)
}

// forgerStream dials with the mux's raft protocol byte and no credentials.
type forgerStream struct{}

func (forgerStream) Accept() (net.Conn, error) { return nil, net.ErrClosed }
func (forgerStream) Close() error              { return nil }
func (forgerStream) Addr() net.Addr            { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1} }
func (forgerStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", string(addr), timeout)
	if err != nil {
		return nil, err
	}
	if _, err := c.Write([]byte{'R'}); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Never trust the log: a CreateTopic whose name walks out of the data dir
// is refused by the controller even when it arrives as a raw command on the
// inter-node port (here a loopback node without authentication, where a
// stranger can reach the controller RPC), and nothing is written outside.
func TestForgedPathTraversalCommandRefused(t *testing.T) {
	n := servertest.Start(t, servertest.Options{})
	victim := filepath.Join(filepath.Dir(n.DataDir), "victimdir")
	rel, err := filepath.Rel(filepath.Join(n.DataDir, "partitions"), victim)
	if err != nil {
		t.Fatal(err)
	}
	if forgeCreateTopic(t, n.RaftAddr, rel) {
		t.Fatalf("the controller applied CreateTopic %q", rel)
	}
	if forgeCreateTopic(t, n.RaftAddr, "../../victimdir") {
		t.Fatal("the controller applied CreateTopic ../../victimdir")
	}
	matches, _ := filepath.Glob(filepath.Join(filepath.Dir(n.DataDir), "*victimdir*"))
	if len(matches) > 0 {
		t.Fatalf("files were created outside the data dir: %v", matches)
	}
	// The node is still healthy and the control case works.
	if !forgeCreateTopic(t, n.RaftAddr, "legal-name") {
		t.Fatal("control: a legal forged CreateTopic was not applied on an unauthenticated loopback node")
	}
}

// The forwarding mark is honoured only on the inter-node port: a client
// that sets X-Runnel-Forwarded on the public port is still forwarded to the
// partition's leader instead of being answered not-leader.
func TestForwardedHeaderFromClientIgnored(t *testing.T) {
	c := servertest.StartCluster(t, servertest.ClusterOptions{Combined: 2, Args: fastSessions})
	n1 := newAPIClient(t, c.Node(1))
	n1.json("POST", "/v1/topics", map[string]any{"name": "fwd", "partitions": 4, "replication_factor": 1}, 201, nil)
	var d api.TopicDetail
	var remote int32 = -1
	servertest.WaitFor(t, 20*time.Second, "a partition led by node 2", func() bool {
		n1.json("GET", "/v1/topics/fwd", nil, 200, &d)
		for _, p := range d.Partitions {
			if p.Leader == 2 {
				remote = p.Partition
				return true
			}
		}
		return false
	})
	body := fmt.Sprintf(`{"records":[{"value":1,"partition":%d}]}`, remote)
	req, _ := http.NewRequest("POST", c.Node(1).URL+"/v1/topics/fwd/records", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Runnel-Forwarded", "1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("produce with a client-set forwarding mark: %d %s", resp.StatusCode, out)
	}
}
