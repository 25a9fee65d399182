package server_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/server/servertest"
)

// Hostile admin requests: counts that drive allocations are bounded on every
// path, and a node survives them answering an error (issue 12, item 1).

const hostileRSSLimit = 1 << 30 // the node stays under 1 GiB RSS

func kafkaAdmin(t *testing.T, n *servertest.Node) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddr), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// nodeAlive checks the process still answers and stayed under the RSS limit.
func nodeAlive(t *testing.T, n *servertest.Node) {
	t.Helper()
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(n.URL + "/livez")
	if err != nil {
		t.Fatalf("node died or hangs: %v\n%s", err, n.Logs())
	}
	resp.Body.Close()
	if _, peak := n.RSS(); peak > hostileRSSLimit {
		t.Fatalf("peak RSS %d MiB, want < %d MiB", peak>>20, hostileRSSLimit>>20)
	}
}

func TestHostileKafkaCreatePartitionsHugeCount(t *testing.T) {
	n := kafkaNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := kafkaAdmin(t, n)
	kafkaCreateTopic(ctx, t, cl, "victim", 1)
	baseline, _ := n.RSS()

	for _, count := range []int32{2147483647, 10_001} {
		req := kmsg.NewPtrCreatePartitionsRequest()
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = "victim", count
		req.Topics = append(req.Topics, rt)
		req.TimeoutMillis = 10_000
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("count %d: the node did not answer: %v\n%s", count, err, n.Logs())
		}
		if code := resp.Topics[0].ErrorCode; code != kerr.InvalidPartitions.Code {
			t.Fatalf("count %d: error %v, want INVALID_PARTITIONS", count, kerr.ErrorForCode(code))
		}
		nodeAlive(t, n)
	}
	_, peak := n.RSS()
	t.Logf("peak RSS %d MiB after the hostile requests, %.2fx the RSS before them (%d MiB)",
		peak>>20, float64(peak)/float64(baseline), baseline>>20)
	// Still serving, and the topic kept its one partition.
	var td api.TopicDetail
	httpGetJSON(t, n.URL+"/v1/topics/victim", &td)
	if len(td.Partitions) != 1 {
		t.Fatalf("victim has %d partitions, want 1", len(td.Partitions))
	}
}

func TestHostileKafkaCreateTopicsHugeCounts(t *testing.T) {
	n := kafkaNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := kafkaAdmin(t, n)

	cases := []struct {
		name       string
		partitions int32
		rf         int16
		want       *kerr.Error
	}{
		{"max-partitions", 2147483647, 1, kerr.InvalidPartitions},
		{"over-topic-limit", 10_001, 1, kerr.InvalidPartitions},
		{"max-rf", 1, 32767, kerr.InvalidReplicationFactor},
		{"over-rf-limit", 1, 17, kerr.InvalidReplicationFactor},
	}
	for _, c := range cases {
		req := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = c.name, c.partitions, c.rf
		req.Topics = append(req.Topics, rt)
		req.TimeoutMillis = 10_000
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("%s: the node did not answer: %v\n%s", c.name, err, n.Logs())
		}
		if code := resp.Topics[0].ErrorCode; code != c.want.Code {
			t.Fatalf("%s: error %v, want %v", c.name, kerr.ErrorForCode(code), c.want)
		}
		nodeAlive(t, n)
	}

	// More topics in one request than allowed: all refused, none created.
	req := kmsg.NewPtrCreateTopicsRequest()
	for i := range 1001 {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = fmt.Sprintf("many-%d", i), 1, 1
		req.Topics = append(req.Topics, rt)
	}
	req.TimeoutMillis = 10_000
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("many topics: the node did not answer: %v", err)
	}
	for _, rt := range resp.Topics {
		if rt.ErrorCode != kerr.InvalidRequest.Code {
			t.Fatalf("topic %s of 1001: error %v, want INVALID_REQUEST", rt.Topic, kerr.ErrorForCode(rt.ErrorCode))
		}
	}
	nodeAlive(t, n)
}

// The cluster-wide partition limit refuses what would exceed it with
// POLICY_VIOLATION (Kafka) and 422 (HTTP); what fits is still created.
func TestHostileClusterPartitionLimit(t *testing.T) {
	n := servertest.Start(t, servertest.Options{Args: []string{"--max-partitions", "30", "--max-partitions-per-topic", "20"}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := kafkaAdmin(t, n)
	kafkaCreateTopic(ctx, t, cl, "first", 20)

	api := newAPIClient(t, n)
	api.problem("POST", "/v1/topics", "application/json", []byte(`{"name":"second","partitions":11}`), 422, "policy-violation")
	req := kmsg.NewPtrCreatePartitionsRequest()
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = "first", 21
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.Topics[0].ErrorCode; code != kerr.InvalidPartitions.Code {
		t.Fatalf("over the per-topic limit: %v, want INVALID_PARTITIONS", kerr.ErrorForCode(code))
	}
	kafkaCreateTopic(ctx, t, cl, "second", 10) // exactly fills the cluster
	ct := kmsg.NewPtrCreateTopicsRequest()
	ctt := kmsg.NewCreateTopicsRequestTopic()
	ctt.Topic, ctt.NumPartitions, ctt.ReplicationFactor = "third", 1, 1
	ct.Topics = append(ct.Topics, ctt)
	cresp, err := ct.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if code := cresp.Topics[0].ErrorCode; code != kerr.PolicyViolation.Code {
		t.Fatalf("over the cluster limit: %v, want POLICY_VIOLATION", kerr.ErrorForCode(code))
	}
}

func TestHostileHTTPCreateTopicHugeCounts(t *testing.T) {
	n := servertest.Start(t, servertest.Options{})
	api := newAPIClient(t, n)
	for _, body := range []string{
		`{"name":"a","partitions":2147483647}`,
		`{"name":"a","partitions":10001}`,
		`{"name":"a","replication_factor":32767}`,
		`{"name":"a","replication_factor":17}`,
	} {
		api.problem("POST", "/v1/topics", "application/json", []byte(body), 400, "invalid-partitions")
		nodeAlive(t, n)
	}
	for _, name := range []string{"..", ".", "../x", strings.Repeat("a", 250), "a/b", ""} {
		body, _ := json.Marshal(map[string]any{"name": name})
		status, resp := api.do("POST", "/v1/topics", "application/json", body)
		var p problem
		_ = json.Unmarshal(resp, &p)
		if status != 400 || !strings.HasSuffix(p.Type, ":invalid-topic-name") && !strings.HasSuffix(p.Type, ":invalid-request") {
			t.Fatalf("name %q: %d %s", name, status, resp)
		}
	}
}

// rpcApply sends one command over the controller RPC (the raft port's 'C'
// protocol: 4-byte length, JSON) as any peer could, and returns the
// response's error code ("" is success).
func rpcApply(t *testing.T, addr string, cmd map[string]any) string {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(15 * time.Second))
	cmd["Version"] = 1
	req, _ := json.Marshal(map[string]any{"v": 1, "m": "apply", "timeout_ms": 10000, "body": cmd})
	frame := binary.BigEndian.AppendUint32([]byte{'C'}, uint32(len(req)))
	if _, err := conn.Write(append(frame, req...)); err != nil {
		t.Fatal(err)
	}
	var hdr [4]byte
	if _, err := io.ReadFull(conn, hdr[:]); err != nil {
		t.Fatalf("no RPC answer: %v", err)
	}
	body := make([]byte, binary.BigEndian.Uint32(hdr[:]))
	if _, err := io.ReadFull(conn, body); err != nil {
		t.Fatal(err)
	}
	var resp struct {
		Code string `json:"code"`
		Msg  string `json:"msg"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		t.Fatalf("RPC answer %s: %v", body, err)
	}
	t.Logf("rpc apply: code %q msg %q", resp.Code, resp.Msg)
	return resp.Code
}

// A command naming a path (not a topic) through the controller RPC is
// refused: no segment files outside the data dir, no RemoveAll outside it.
func TestHostileControllerRPCPathTraversal(t *testing.T) {
	n := servertest.Start(t, servertest.Options{})
	outside := filepath.Join(filepath.Dir(n.DataDir), "victimdir-0")
	if err := os.MkdirAll(filepath.Join(filepath.Dir(n.DataDir), "keepme-0"), 0o755); err != nil {
		t.Fatal(err)
	}
	create := map[string]any{"CreateTopic": map[string]any{"Name": "../../victimdir", "Partitions": 1, "ReplicationFactor": 1, "Assignments": [][]int32{{1}}}}
	if code := rpcApply(t, n.RaftAddr, create); code == "" {
		t.Fatal("a topic named ../../victimdir was created")
	}
	if _, err := os.Stat(outside); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s exists (err %v): files written outside the data dir", outside, err)
	}
	del := map[string]any{"DeleteTopic": map[string]any{"Name": "../../keepme"}}
	if code := rpcApply(t, n.RaftAddr, del); code == "" {
		t.Fatal("deleting ../../keepme succeeded")
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(n.DataDir), "keepme-0")); err != nil {
		t.Fatalf("a directory outside the data dir was removed: %v", err)
	}
	nodeAlive(t, n)
	n.Stop()
	n.Start() // the log replays cleanly
	nodeAlive(t, n)
}
