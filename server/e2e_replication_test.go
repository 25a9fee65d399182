package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/segments"
	"github.com/runnel/runnel/server/servertest"
)

// partitionView is a partition of GET /v1/topics/{topic} (the api
// package's shape).
type partitionView = api.PartitionDetail

func describe(n *servertest.Node, topic string) ([]partitionView, bool) {
	var d topicDetail
	client := &http.Client{Timeout: 3 * time.Second}
	resp, err := client.Get(n.URL + "/v1/topics/" + topic)
	if err != nil {
		return nil, false
	}
	defer resp.Body.Close()
	return d.Partitions, resp.StatusCode == 200 && json.NewDecoder(resp.Body).Decode(&d) == nil
}

// produceOne sends one record with acks=all through node n and returns its
// offset, or ok=false when it was not acknowledged.
func produceOne(n *servertest.Node, topic, value string, timeout time.Duration) (int64, bool) {
	body, _ := json.Marshal(map[string]any{"records": []map[string]any{{"value": value, "partition": 0}}})
	client := &http.Client{Timeout: timeout}
	resp, err := client.Post(n.URL+"/v1/topics/"+topic+"/records?encoding=string&acks=all", "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	var out producedOffsets
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&out) != nil || len(out.Offsets) != 1 {
		return 0, false
	}
	return out.Offsets[0].Offset, true
}

func createReplicatedTopic(t *testing.T, n *servertest.Node, name string) {
	t.Helper()
	client := &http.Client{Timeout: 15 * time.Second}
	resp, err := client.Post(n.URL+"/v1/topics", "application/json", bytes.NewReader([]byte(
		fmt.Sprintf(`{"name":%q,"partitions":1,"replication_factor":3,"configs":{"min.insync.replicas":"2"}}`, name))))
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("create %s: %v %v", name, err, resp)
	}
	resp.Body.Close()
	servertest.WaitFor(t, 30*time.Second, "all three replicas in sync", func() bool {
		ps, ok := describe(n, name)
		return ok && len(ps) == 1 && len(ps[0].ISR) == 3
	})
}

// readAll reads partition 0 through node n from the start.
func readAll(t *testing.T, n *servertest.Node, topic string) map[int64]string {
	t.Helper()
	c := newAPIClient(t, n)
	out := map[int64]string{}
	next := int64(0)
	for {
		var got consumed
		c.json("GET", fmt.Sprintf("/v1/topics/%s/partitions/0/records?offset=%d&encoding=string&max_records=1000", topic, next), nil, 200, &got)
		for _, r := range got.Records {
			if r.Offset != next {
				t.Fatalf("gap: offset %d after %d", r.Offset, next-1)
			}
			var v string
			json.Unmarshal(r.Value, &v)
			out[r.Offset] = v
			next++
		}
		if len(got.Records) == 0 || next >= got.HighWatermark {
			return out
		}
	}
}

// replicaBytes reads a stopped node's copy of partition 0 up to end.
func replicaBytes(t *testing.T, n *servertest.Node, topic string, end int64) []byte {
	t.Helper()
	dir := filepath.Join(n.DataDir, "partitions", topic+"-0")
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("node %s has no replica: %v", n.URL, err)
	}
	log, err := segments.Open(dir, segments.DefaultConfig(), segments.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	var out []byte
	for off := log.StartOffset(); off < end; {
		c, err := log.Read(off, 1<<20, end)
		if err != nil {
			t.Fatal(err)
		}
		b, err := c.Bytes()
		c.Close()
		if err != nil || len(b) == 0 {
			break
		}
		out = append(out, b...)
		// Advance past the last whole batch: base offset + last offset delta + 1.
		next := off
		for rest := b; len(rest) >= 61; {
			size := 12 + int(int32(uint32(rest[8])<<24|uint32(rest[9])<<16|uint32(rest[10])<<8|uint32(rest[11])))
			base := int64(0)
			for i := 0; i < 8; i++ {
				base = base<<8 | int64(rest[i])
			}
			delta := int64(int32(uint32(rest[23])<<24 | uint32(rest[24])<<16 | uint32(rest[25])<<8 | uint32(rest[26])))
			next = base + delta + 1
			rest = rest[size:]
		}
		if next <= off {
			break
		}
		off = next
	}
	return out
}

// With RF=3 and min.insync.replicas=2, acks=all writes survive repeated
// kill -9 of the partition leader: every acknowledged record is present once
// at its offset, and the three replicas hold byte-identical logs.
func TestReplicationSurvivesLeaderKills(t *testing.T) {
	testReplicationSurvivesLeaderKills(t, servertest.ClusterOptions{Combined: 3, Args: append(fastSessions, "--replica-lag-time-max", "3s")})
}

func testReplicationSurvivesLeaderKills(t *testing.T, opts servertest.ClusterOptions) {
	kills := 3
	if os.Getenv("RUNNEL_CHAOS") != "" {
		kills = 10
	}
	c := servertest.StartCluster(t, opts)
	createReplicatedTopic(t, c.Node(1), "replicated")

	acked := map[int64]string{}
	var mu sync.Mutex
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				n := c.Nodes[(w+i)%3]
				v := fmt.Sprintf("w%d-%d", w, i)
				if off, ok := produceOne(n, "replicated", v, 5*time.Second); ok {
					mu.Lock()
					if prev, dup := acked[off]; dup {
						t.Errorf("offset %d acknowledged twice: %q and %q", off, prev, v)
					}
					acked[off] = v
					mu.Unlock()
				}
			}
		}(w)
	}
	var unavailable []time.Duration
	for k := 0; k < kills; k++ {
		time.Sleep(700 * time.Millisecond)
		ps, ok := describe(c.Node(1+k%3), "replicated")
		if !ok || ps[0].Leader < 1 {
			continue
		}
		leader := c.Node(int(ps[0].Leader))
		killedAt := time.Now()
		leader.Kill()
		survivor := c.Node(int(ps[0].Leader)%3 + 1)
		servertest.WaitFor(t, 60*time.Second, "a write acknowledged by the new leader", func() bool {
			_, ok := produceOne(survivor, "replicated", fmt.Sprintf("probe-%d", k), 3*time.Second)
			return ok
		})
		unavailable = append(unavailable, time.Since(killedAt))
		leader.Start()
		servertest.WaitFor(t, 60*time.Second, "ISR back to three", func() bool {
			ps, ok := describe(survivor, "replicated")
			return ok && len(ps[0].ISR) == 3
		})
	}
	close(stop)
	wg.Wait()
	t.Logf("unavailability after leader kill -9: %v", unavailable)

	got := readAll(t, c.Node(1), "replicated")
	for off, v := range acked {
		if got[off] != v {
			t.Fatalf("acknowledged %q at offset %d, found %q", v, off, got[off])
		}
	}
	seen := map[string]int64{}
	for off, v := range got {
		if prev, dup := seen[v]; dup {
			t.Fatalf("%q stored twice, at %d and %d", v, prev, off)
		}
		seen[v] = off
	}
	ps, _ := describe(c.Node(1), "replicated")
	hw := ps[0].HighWatermark
	for _, n := range c.Nodes {
		n.Stop()
	}
	first := replicaBytes(t, c.Node(1), "replicated", hw)
	for _, n := range c.Nodes[1:] {
		if b := replicaBytes(t, n, "replicated", hw); !bytes.Equal(b, first) {
			t.Fatalf("replica on %s differs from node 1 below the high watermark %d (%d vs %d bytes)", n.URL, hw, len(b), len(first))
		}
	}
	if len(acked) == 0 {
		t.Fatal("nothing was acknowledged")
	}
	t.Logf("%d acknowledged records, %d kills, replicas identical up to %d", len(acked), kills, hw)
}

// A leader cut off from the controllers and its followers acknowledges
// nothing with acks=all; the others elect a new leader; when it returns, it
// truncates the tail it wrote alone (acks=1) and converges.
func TestReplicationIsolatedLeader(t *testing.T) {
	c := servertest.StartCluster(t, servertest.ClusterOptions{Combined: 3, Proxied: true, Args: append(fastSessions, "--replica-lag-time-max", "3s")})
	createReplicatedTopic(t, c.Node(1), "isolated")
	before := map[int64]string{}
	for i := 0; i < 20; i++ {
		off, ok := produceOne(c.Node(1), "isolated", fmt.Sprintf("before-%d", i), 10*time.Second)
		if !ok {
			t.Fatalf("produce before isolation failed")
		}
		before[off] = fmt.Sprintf("before-%d", i)
	}
	ps, _ := describe(c.Node(1), "isolated")
	old := ps[0].Leader
	oldNode := c.Node(int(old))
	c.Isolate(int(old))

	// acks=all on the isolated leader is never acknowledged.
	if _, ok := produceOne(oldNode, "isolated", "lost-all", 4*time.Second); ok {
		t.Fatal("an isolated leader acknowledged an acks=all write")
	}
	// acks=1 lands in its log only: a divergent tail.
	body := []byte(`{"records":[{"value":"lost-one","partition":0}]}`)
	if resp, err := http.Post(oldNode.URL+"/v1/topics/isolated/records?encoding=string&acks=1", "application/json", bytes.NewReader(body)); err == nil {
		resp.Body.Close()
	}

	others := without(c.Nodes, oldNode)
	servertest.WaitFor(t, 60*time.Second, "a new leader elected by the majority", func() bool {
		ps, ok := describe(others[0], "isolated")
		return ok && ps[0].Leader > 0 && ps[0].Leader != old
	})
	after := map[int64]string{}
	for i := 0; i < 10; i++ {
		var off int64
		servertest.WaitFor(t, 30*time.Second, "acks=all on the new leader", func() bool {
			o, ok := produceOne(others[0], "isolated", fmt.Sprintf("after-%d", i), 5*time.Second)
			off = o
			return ok
		})
		after[off] = fmt.Sprintf("after-%d", i)
	}
	c.Heal(int(old))
	servertest.WaitFor(t, 60*time.Second, "the old leader back in sync", func() bool {
		ps, ok := describe(others[0], "isolated")
		return ok && len(ps[0].ISR) == 3
	})
	for _, n := range c.Nodes {
		got := readAll(t, n, "isolated")
		for off, v := range before {
			if got[off] != v {
				t.Fatalf("node %s: offset %d holds %q, acknowledged %q", n.URL, off, got[off], v)
			}
		}
		for off, v := range after {
			if got[off] != v {
				t.Fatalf("node %s: offset %d holds %q, acknowledged %q", n.URL, off, got[off], v)
			}
		}
		for _, v := range got {
			if v == "lost-all" || v == "lost-one" {
				t.Fatalf("node %s shows %q, written only on the isolated leader", n.URL, v)
			}
		}
	}
	ps, _ = describe(others[0], "isolated")
	hw := ps[0].HighWatermark
	for _, n := range c.Nodes {
		n.Stop()
	}
	first := replicaBytes(t, c.Node(1), "isolated", hw)
	for _, n := range c.Nodes[1:] {
		if b := replicaBytes(t, n, "isolated", hw); !bytes.Equal(b, first) {
			t.Fatalf("replica on %s differs below the high watermark", n.URL)
		}
	}
}

// Leadership moves back to the preferred replica on request once it is in
// sync again (the automatic rebalance is off here so the request is what
// moves it).
func TestPreferredLeaderElectionOnRequest(t *testing.T) {
	c := servertest.StartCluster(t, servertest.ClusterOptions{Combined: 3, Args: append(fastSessions, "--leader-rebalance-interval", "0")})
	createReplicatedTopic(t, c.Node(1), "pref")
	ps, _ := describe(c.Node(1), "pref")
	preferred := ps[0].Replicas[0]
	if ps[0].Leader != preferred {
		t.Fatalf("new partition led by %d, preferred %d", ps[0].Leader, preferred)
	}
	other := c.Node(int(preferred)%3 + 1)
	c.Node(int(preferred)).Kill()
	servertest.WaitFor(t, 30*time.Second, "leadership moved off the killed preferred replica", func() bool {
		ps, ok := describe(other, "pref")
		return ok && ps[0].Leader > 0 && ps[0].Leader != preferred
	})
	c.Node(int(preferred)).Start()
	servertest.WaitFor(t, 30*time.Second, "the preferred replica back in sync", func() bool {
		ps, ok := describe(other, "pref")
		return ok && len(ps[0].ISR) == 3
	})
	if ps, _ := describe(other, "pref"); ps[0].Leader == preferred {
		t.Fatalf("leadership returned with the automatic rebalance disabled")
	}
	var after topicDetail
	newAPIClient(t, other).json("POST", "/v1/topics/pref/elect-leaders", nil, 200, &after)
	if after.Partitions[0].Leader != preferred {
		t.Fatalf("after elect-leaders: leader %d, preferred %d", after.Partitions[0].Leader, preferred)
	}
	servertest.WaitFor(t, 20*time.Second, "an acks=all write through the re-elected preferred leader", func() bool {
		_, ok := produceOne(c.Node(int(preferred)), "pref", "after-election", 5*time.Second)
		return ok
	})
}
