package server_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/runnel/runnel/server/servertest"
)

// Without a quorum no controller can be elected: an admin write fails fast
// (503 not-controller with Retry-After) instead of holding the client for
// the whole request timeout (it used to answer after exactly 10 s).
func TestAdminWriteWithoutQuorumFailsFast(t *testing.T) {
	c := servertest.StartCluster(t, servertest.ClusterOptions{Combined: 3, Args: fastSessions})
	c.Node(2).Kill()
	c.Node(3).Kill()
	client := &http.Client{Timeout: 8 * time.Second}
	// The survivor may still believe in the old leader for a moment; once
	// it knows there is none, the answer must come well within 8 s.
	servertest.WaitFor(t, 60*time.Second, "a fast not-controller answer", func() bool {
		start := time.Now()
		resp, err := client.Post(c.Node(1).URL+"/v1/topics", "application/json", strings.NewReader(`{"name":"noquorum","partitions":1}`))
		if err != nil {
			t.Fatalf("admin write without a quorum: %v (after %v)", err, time.Since(start))
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 201 {
			t.Fatalf("a topic was created without a quorum: %s", body)
		}
		t.Logf("answer %d after %v: %s", resp.StatusCode, time.Since(start).Round(time.Millisecond), body)
		return resp.StatusCode == 503 && strings.Contains(string(body), "not-controller") && resp.Header.Get("Retry-After") != ""
	})
}
