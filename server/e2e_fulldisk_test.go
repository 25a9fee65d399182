package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runnel/runnel/internal/disktest"
	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/server/servertest"
)

// A node whose disk fills up gives up the leadership of its partitions and
// leaves their ISRs, so the others keep taking acks=all writes; once space
// returns it catches up and is back in sync, without a restart (issue 20,
// item 5: it stayed leader answering errors and stayed in the ISRs,
// holding the high watermark back).
func TestFullDiskGivesUpLeadership(t *testing.T) {
	c := servertest.NewCluster(t, servertest.ClusterOptions{Combined: 3,
		Args: append(fastSessions, "--replica-lag-time-max", "3s", "--storage-retry-interval", "200ms")})
	sick := c.Node(3)
	parts := filepath.Join(sick.DataDir, "partitions") // the metadata stays off the small disk
	disktest.MountTmpfs(t, parts, 16<<20)
	t.Cleanup(func() {
		if t.Failed() {
			logs := sick.Logs()
			t.Logf("node 3's log (last 8 KiB):\n%s", logs[max(0, len(logs)-8192):])
		}
	})
	for _, n := range c.Nodes {
		n.StartNoWait()
	}
	for _, n := range c.Nodes {
		n.WaitReady(60 * time.Second)
	}
	const topic = "disk"
	client := newAPIClient(t, c.Node(1))
	client.json("POST", "/v1/topics", map[string]any{"name": topic, "partitions": 3, "replication_factor": 3,
		"configs": map[string]string{"min.insync.replicas": "2"}}, 201, nil)
	var led int32 = -1 // a partition the sick node leads
	servertest.WaitFor(t, 30*time.Second, "every ISR complete", func() bool {
		ps, ok := describe(c.Node(1), topic)
		if !ok || len(ps) != 3 {
			return false
		}
		for _, p := range ps {
			if len(p.ISR) != 3 {
				return false
			}
			if p.Leader == 3 {
				led = p.Partition
			}
		}
		return led >= 0
	})

	disktest.FillDisk(t, filepath.Join(parts, "ballast"))
	produce := func(p int32, v string) bool {
		_, ok := produceTo(c.Node(1), topic, p, v, 5*time.Second)
		return ok
	}
	// Writes to its partitions fail until the others take over; then they
	// are acknowledged by the other two, node 3 leading nothing and in no
	// ISR.
	acked := map[string]int32{}
	round := 0
	servertest.WaitFor(t, 60*time.Second, "node 3 out of every ISR and acks=all writes to every partition acknowledged", func() bool {
		round++
		all := true
		for p := range int32(3) {
			v := fmt.Sprintf("during-%d-%d", p, round)
			if produce(p, v) {
				acked[v] = p
			} else {
				all = false
			}
		}
		ps, ok := describe(c.Node(1), topic)
		if !ok || !all {
			return false
		}
		for _, p := range ps {
			if p.Leader == 3 || slices.Contains(p.ISR, 3) {
				return false
			}
		}
		return true
	})

	if err := os.Remove(filepath.Join(parts, "ballast")); err != nil {
		t.Fatal(err)
	}
	servertest.WaitFor(t, 90*time.Second, "node 3 back in every ISR", func() bool {
		produce(0, "after")
		ps, ok := describe(c.Node(1), topic)
		if !ok {
			return false
		}
		for _, p := range ps {
			if !slices.Contains(p.ISR, 3) {
				return false
			}
		}
		return true
	})
	for v, p := range acked {
		if !slices.Contains(partitionValues(t, c.Node(3), topic, p), v) {
			t.Fatalf("acknowledged %q missing from partition %d", v, p)
		}
	}
}

// produceTo posts one acks=all record to partition p through n.
func produceTo(n *servertest.Node, topic string, p int32, value string, timeout time.Duration) (int64, bool) {
	body, _ := json.Marshal(map[string]any{"records": []map[string]any{{"value": value, "partition": p}}})
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

// partitionValues reads partition p through node n from its start.
func partitionValues(t *testing.T, n *servertest.Node, topic string, p int32) []string {
	t.Helper()
	c := newAPIClient(t, n)
	var out []string
	for next := int64(0); ; {
		var got consumed
		c.json("GET", fmt.Sprintf("/v1/topics/%s/partitions/%d/records?offset=%d&encoding=string&max_records=1000", topic, p, next), nil, 200, &got)
		for _, r := range got.Records {
			var v string
			json.Unmarshal(r.Value, &v)
			out = append(out, v)
			next = r.Offset + 1
		}
		if len(got.Records) == 0 || next >= got.HighWatermark {
			return out
		}
	}
}

// A node whose whole data directory fills up stays up: appends are refused
// while the filesystem is below --min-free-disk, so the metadata store
// (badger, writing through memory-mapped files) keeps room, and metadata
// writes still succeed; deleting data brings writes back without a
// restart. Without the reserve the node died of SIGBUS in badger (issue 20,
// item 5). The reserve is above the floor the state store keeps
// (raftfsm.StateDiskFloor, below which it fail-stops,
// TestMetadataStateFullDiskExits), with 8 MiB of metadata writes between
// them; the disk is big enough for it (the reserve is capped at a tenth).
func TestFullDiskKeepsMetadataAlive(t *testing.T) {
	testFullDiskKeepsMetadataAlive(t, fmt.Sprint(raftfsm.StateDiskFloor+8<<20))
}

func testFullDiskKeepsMetadataAlive(t *testing.T, reserve string) {
	dataDir := filepath.Join(t.TempDir(), "data")
	const disk = 11 * (raftfsm.StateDiskFloor + 8<<20)
	disktest.MountTmpfs(t, dataDir, disk)
	n := servertest.Start(t, servertest.Options{DataDir: dataDir,
		Args: []string{"--storage-retry-interval", "200ms", "--min-free-disk", reserve}})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("node log (last 4 KiB or the crash):\n%s", crashOrTail(n.Logs()))
		}
	})
	c := newAPIClient(t, n)
	c.json("POST", "/v1/topics", map[string]any{"name": "fill", "partitions": 1, "replication_factor": 1}, 201, nil)
	value := strings.Repeat("x", 64<<10)
	records := make([]map[string]any, 4)
	for i := range records {
		records[i] = map[string]any{"value": value, "partition": 0}
	}
	body, _ := json.Marshal(map[string]any{"records": records})
	refused := false
	for i := 0; i < 2*disk/(256<<10) && !refused; i++ { // twice the disk
		status, _ := c.do("POST", "/v1/topics/fill/records?encoding=string", "application/json", body)
		refused = status != 200
	}
	if !refused {
		t.Fatal("appends never refused on a full disk")
	}
	// Metadata keeps working on the full disk.
	for i := range 200 {
		status, resp := c.do("POST", "/v1/topics", "application/json", []byte(fmt.Sprintf(`{"name":"meta-%d","partitions":1,"replication_factor":1}`, i)))
		if status != 201 {
			t.Fatalf("create topic %d on a full disk: %d %s\n%s", i, status, resp, n.Logs())
		}
	}
	if status, _ := c.do("GET", "/livez", "", nil); status != 200 {
		t.Fatalf("/livez %d on a full disk:\n%s", status, n.Logs())
	}
	// Space back: writes resume by themselves.
	c.json("DELETE", "/v1/topics/fill", nil, 204, nil)
	servertest.WaitFor(t, 60*time.Second, "appends accepted again after the data was deleted", func() bool {
		status, _ := c.do("POST", "/v1/topics/meta-0/records?encoding=string", "application/json", []byte(`{"records":[{"value":"back"}]}`))
		return status == 200
	})
}

// A partitions' reserve (--min-free-disk) not above the metadata state
// store's floor is warned about at start, with the figures: partitions
// filling a shared disk would stop the node (the state store
// fail-stops) instead of only refusing appends. The default is above it.
func TestMinFreeDiskBelowStateFloorWarned(t *testing.T) {
	warning := fmt.Sprintf("not above the %d the metadata state store needs", raftfsm.StateDiskFloor)
	low := servertest.Start(t, servertest.Options{KafkaAddr: "-", Args: []string{"--min-free-disk", "1048576"}})
	if !strings.Contains(low.Logs(), warning) || !strings.Contains(low.Logs(), "--min-free-disk 1048576") {
		t.Fatalf("no warning for --min-free-disk 1048576; log:\n%s", tail(low.Logs(), 8192))
	}
	def := servertest.Start(t, servertest.Options{NodeID: 2, KafkaAddr: "-"})
	if strings.Contains(def.Logs(), warning) {
		t.Fatalf("the default --min-free-disk warned; log:\n%s", tail(def.Logs(), 8192))
	}
}
