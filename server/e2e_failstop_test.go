package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runnel/runnel/internal/disktest"
	"github.com/runnel/runnel/server/servertest"
)

// TestMetadataLogFullDiskExits: a node whose metadata (raft) log cannot be
// written fail-stops: the process exits 1, having said why once, instead
// of running on with its metadata frozen (issue 19). The fault is a real
// one, which permission bits would not give a test running as root: the
// raft log gets a small tmpfs of its own, filled up, so the next segment
// cannot be created (ENOSPC). Restarted on the full disk, it stops again,
// during its start; restarted with space back, it runs again.
func TestMetadataLogFullDiskExits(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	raftLog := filepath.Join(dataDir, "meta", "raftlog")
	disktest.MountTmpfs(t, raftLog, 1<<20)
	const segment = 32 << 10
	n := servertest.Start(t, servertest.Options{DataDir: dataDir, KafkaAddr: "-",
		Args: []string{"--test-raft-log-segment-bytes", fmt.Sprint(segment)}})
	ballast := filepath.Join(raftLog, "ballast")
	disktest.FillDisk(t, ballast)

	// Topic creations fill the open segment; the one that needs the next
	// segment fails, and the node stops. Each create is one raft entry of
	// a few hundred bytes: a segment holds about a hundred.
	client := &http.Client{Timeout: 10 * time.Second}
	var acked []string
	for i := 0; i < 4*segment/100; i++ {
		name := fmt.Sprintf("t%04d", i)
		body, _ := json.Marshal(map[string]any{"name": name, "partitions": 8, "replication_factor": 1})
		resp, err := client.Post(n.URL+"/v1/topics", "application/json", bytes.NewReader(body))
		if err != nil {
			break
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			break
		}
		acked = append(acked, name)
	}
	// A node that fail-stops exits at once; 60 s is for a loaded machine.
	exitCode, exited := n.WaitExit(60 * time.Second)
	logs := n.Logs()
	if !exited {
		n.Kill()
		t.Fatalf("the node still runs after its metadata log filled up (%d topics created); log tail:\n%s",
			len(acked), tail(logs, 8192))
	}
	if exitCode != 1 {
		t.Fatalf("exit code %d, want 1; log tail:\n%s", exitCode, tail(logs, 8192))
	}
	if len(acked) == 0 {
		t.Fatal("no topic was created before the log filled up: the fault came too early to test a write path")
	}
	// Why, once: the failed write at error level (with the cause), and
	// main's last line naming it.
	const failed = "the metadata log cannot be written; the node stops"
	if c := strings.Count(logs, failed); c != 1 {
		t.Fatalf("%q logged %d times, want once; log tail:\n%s", failed, c, tail(logs, 8192))
	}
	if !strings.Contains(logs, "no space left on device") {
		t.Fatalf("the log does not name the cause (no space left on device); log tail:\n%s", tail(logs, 8192))
	}
	lines := strings.Split(strings.TrimSpace(logs), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "runnel: metadata log: ") {
		t.Fatalf("last line %q, want the exit's reason (runnel: metadata log: ...)", last)
	}

	// Restarted on the still full disk, the node cannot write its log
	// either (the rebuild of its log the failed append left refusing
	// appends, or the first append of its term): it stops during the
	// start, saying why, not waiting for ever to be ready.
	before := len(logs)
	n.StartNoWait()
	exitCode, exited = n.WaitExit(90 * time.Second)
	logs = n.Logs()[before:]
	if !exited {
		n.Kill()
		t.Fatalf("restarted on a full disk, the node still runs; log tail:\n%s", tail(logs, 8192))
	}
	lines = strings.Split(strings.TrimSpace(logs), "\n")
	if last := lines[len(lines)-1]; exitCode != 1 || !strings.HasPrefix(last, "runnel: ") || !strings.Contains(last, "raft log") {
		t.Fatalf("restarted on a full disk: exit code %d, last line %q; want 1 and the raft log's failure", exitCode, last)
	}

	// Space back, the node starts again (raft-wal had left its tail
	// segment sealed on disk by the failed append, refusing every append
	// after: the node exited at every start) with every topic whose
	// create was acknowledged, and takes new ones.
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	before = len(n.Logs())
	n.StartNoWait()
	n.WaitReady(90 * time.Second)
	c := newAPIClient(t, n)
	for _, name := range acked {
		c.json(http.MethodGet, "/v1/topics/"+name, nil, http.StatusOK, nil)
	}
	c.json(http.MethodPost, "/v1/topics", map[string]any{"name": "after", "partitions": 1, "replication_factor": 1}, http.StatusCreated, nil)
	if logs := n.Logs()[before:]; !strings.Contains(logs, "rebuilding the log from its committed entries") {
		t.Fatalf("the restart does not say it rebuilt the raft log; log tail:\n%s", tail(logs, 8192))
	}
}

// tail is the last max bytes of s.
func tail(s string, max int) string { return s[len(s)-min(len(s), max):] }
