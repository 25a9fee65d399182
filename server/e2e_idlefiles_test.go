package server_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runnel/runnel/server/servertest"
)

// TestIdleLogFilesClose (issue 19): a node run with --log-idle-timeout 1s
// holds a descriptor per partition it wrote, and gives them back (its
// /proc/PID/fd shows none under the partitions directory) a maintenance
// round after they went idle; the next read finds every record.
func TestIdleLogFilesClose(t *testing.T) {
	node := servertest.Start(t, servertest.Options{Args: []string{"--log-idle-timeout", "1s"}})
	c := newAPIClient(t, node)
	const parts = 20
	c.json("POST", "/v1/topics", map[string]any{"name": "idle", "partitions": parts}, http.StatusCreated, nil)
	for p := range parts {
		c.json("POST", "/v1/topics/idle/records", map[string]any{"records": []map[string]any{{"value": fmt.Sprint("v", p), "partition": p}}}, http.StatusOK, nil)
	}
	open := func() int { return partitionFDs(t, node) }
	if n := open(); n < parts {
		t.Fatalf("%d descriptors under the partitions directory after writing %d partitions, want at least %d", n, parts, parts)
	}
	// A maintenance round runs every 5 s: bounded wait, no timing asserted.
	deadline := time.Now().Add(time.Minute)
	for open() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d partition descriptors still open a minute after the writes", open())
		}
		time.Sleep(100 * time.Millisecond)
	}
	for p := range parts {
		var out struct {
			Records []struct{ Value any } `json:"records"`
		}
		c.json("GET", fmt.Sprintf("/v1/topics/idle/partitions/%d/records?offset=0", p), nil, http.StatusOK, &out)
		if len(out.Records) != 1 || out.Records[0].Value != fmt.Sprint("v", p) {
			t.Fatalf("partition %d after its files were closed: %+v", p, out.Records)
		}
	}
}

// partitionFDs counts the node's open descriptors on files under its
// partitions directory.
func partitionFDs(t *testing.T, node *servertest.Node) int {
	t.Helper()
	fdDir := fmt.Sprintf("/proc/%d/fd", node.PID())
	ents, err := os.ReadDir(fdDir)
	if err != nil {
		t.Skipf("no %s: %v", fdDir, err)
	}
	prefix := filepath.Join(node.DataDir, "partitions") + string(filepath.Separator)
	n := 0
	for _, e := range ents {
		if target, err := os.Readlink(filepath.Join(fdDir, e.Name())); err == nil && strings.HasPrefix(target, prefix) {
			n++
		}
	}
	return n
}
