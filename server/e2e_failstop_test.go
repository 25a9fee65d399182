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
	"github.com/runnel/runnel/raftfsm"
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
	acked := createTopicsUntilRefused(n, 4*segment/100)
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

// createTopicsUntilRefused creates topics t0000, t0001... of 8
// partitions through n, at most max, until one is refused or n stops
// answering; it returns those acknowledged.
func createTopicsUntilRefused(n *servertest.Node, max int) []string {
	client := &http.Client{Timeout: 10 * time.Second}
	var acked []string
	for i := range max {
		name := fmt.Sprintf("t%04d", i)
		body, _ := json.Marshal(map[string]any{"name": name, "partitions": 8, "replication_factor": 1})
		resp, err := client.Post(n.URL+"/v1/topics", "application/json", bytes.NewReader(body))
		if err != nil {
			return acked
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			return acked
		}
		acked = append(acked, name)
	}
	return acked
}

// tail is the last max bytes of s.
func tail(s string, max int) string { return s[len(s)-min(len(s), max):] }

// TestMetadataStateFullDiskExits: a node whose metadata state store
// (badger, under meta/state) runs out of disk fail-stops as for its log:
// exit 1, the cause said once, instead of dying of SIGBUS (issue 19
// leftover: badger writes its memtable's write-ahead log through a
// memory-mapped file, and a write to a page the full disk cannot back is
// a fault the Go runtime cannot recover: "unexpected fault address", a
// goroutine dump, exit 2, nothing closed). The state store gets a tmpfs
// of its own, room for raftfsm.StateDiskFloor and a little more, filled
// up. Restarted on the full disk it refuses to
// start, saying why; with space back it runs again with every topic whose
// create was acknowledged.
func TestMetadataStateFullDiskExits(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	state := filepath.Join(dataDir, "meta", "state")
	disktest.MountTmpfs(t, state, raftfsm.StateDiskFloor+8<<20)
	n := servertest.Start(t, servertest.Options{DataDir: dataDir, KafkaAddr: "-"})
	c := newAPIClient(t, n)
	var acked []string
	for i := range 5 {
		name := fmt.Sprintf("before%d", i)
		c.json(http.MethodPost, "/v1/topics", map[string]any{"name": name, "partitions": 8, "replication_factor": 1}, http.StatusCreated, nil)
		acked = append(acked, name)
	}
	ballast := filepath.Join(state, "ballast")
	disktest.FillDisk(t, ballast)

	// Each create is one state transaction of a few KiB through the
	// memtable's log: without a check, a few of them pass the pages
	// badger's files had already touched.
	acked = append(acked, createTopicsUntilRefused(n, 2000)...)
	exitCode, exited := n.WaitExit(60 * time.Second)
	logs := n.Logs()
	if !exited {
		n.Kill()
		t.Fatalf("the node still runs after its state store's disk filled up (%d topics created); log tail:\n%s",
			len(acked), tail(logs, 8192))
	}
	if exitCode != 1 || strings.Contains(logs, "fatal error") {
		t.Fatalf("exit code %d, want 1 and no crash; log head of the crash or tail:\n%s", exitCode, crashOrTail(logs))
	}
	const failed = "the metadata state cannot be written; the node stops"
	if c := strings.Count(logs, failed); c != 1 {
		t.Fatalf("%q logged %d times, want once; log tail:\n%s", failed, c, tail(logs, 8192))
	}
	lines := strings.Split(strings.TrimSpace(logs), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "runnel: metadata log: ") || !strings.Contains(last, "free") {
		t.Fatalf("last line %q, want the exit's reason naming the free space", last)
	}

	// Restarted on the still full disk: it refuses to start, saying why,
	// before badger could touch the disk.
	before := len(logs)
	n.StartNoWait()
	exitCode, exited = n.WaitExit(90 * time.Second)
	logs = n.Logs()[before:]
	if !exited {
		n.Kill()
		t.Fatalf("restarted on a full disk, the node still runs; log tail:\n%s", tail(logs, 8192))
	}
	lines = strings.Split(strings.TrimSpace(logs), "\n")
	if last := lines[len(lines)-1]; exitCode != 1 || !strings.HasPrefix(last, "runnel: ") || !strings.Contains(last, "free") {
		t.Fatalf("restarted on a full disk: exit code %d, last line %q; want 1 and the free space named\n%s", exitCode, last, crashOrTail(logs))
	}

	// Space back: it starts, with every acknowledged topic.
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	n.StartNoWait()
	n.WaitReady(90 * time.Second)
	c = newAPIClient(t, n)
	for _, name := range acked {
		c.json(http.MethodGet, "/v1/topics/"+name, nil, http.StatusOK, nil)
	}
	c.json(http.MethodPost, "/v1/topics", map[string]any{"name": "after", "partitions": 1, "replication_factor": 1}, http.StatusCreated, nil)
}

// crashOrTail is a Go crash's first lines when logs hold one, else the
// last 8 KiB.
func crashOrTail(logs string) string {
	if i := strings.Index(logs, "fatal error"); i >= 0 {
		return logs[max(0, i-2000):min(len(logs), i+3000)]
	}
	return tail(logs, 8192)
}
