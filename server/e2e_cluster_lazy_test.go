package server_test

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/runnel/runnel/server/servertest"
)

// Followers, and leaders answering them, leave the logs of partitions
// that hold no record unopened (issue 19): in a 3-node cluster with
// replication factor 3 every node used to open (and create on disk) every
// log, led or followed, so lazy logs saved nothing once replicated. After
// an acks=all write to partition 0 its followers have fetched from its
// leader, so they have looked at every other partition that leader leads,
// and the leader answered them: none of those may exist on any node.
func TestFollowersLeaveEmptyLogsUnopened(t *testing.T) {
	c := servertest.StartCluster(t, servertest.ClusterOptions{Combined: 3})
	n1 := c.Node(1)
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Post(n1.URL+"/v1/topics", "application/json",
		bytes.NewReader([]byte(`{"name":"lazy3","partitions":30,"replication_factor":3}`)))
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("create: %v %v", err, resp)
	}
	resp.Body.Close()
	servertest.WaitFor(t, 30*time.Second, "an acks=all write to partition 0", func() bool {
		_, ok := produceOne(n1, "lazy3", "v", 10*time.Second)
		return ok
	})
	ps, ok := describe(n1, "lazy3")
	if !ok || len(ps) != 30 {
		t.Fatalf("describe: %v %d", ok, len(ps))
	}
	checked := 0
	for _, p := range ps[1:] {
		if p.Leader != ps[0].Leader {
			continue
		}
		checked++
		for i, n := range c.Nodes {
			_, err := os.Stat(filepath.Join(n.DataDir, "partitions", fmt.Sprintf("lazy3-%d", p.Partition)))
			if id := int32(i + 1); err == nil {
				t.Errorf("node %d (leader %d) created the log of the empty partition %d", id, p.Leader, p.Partition)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no partition shares partition 0's leader")
	}
}
