package quorum

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runnel/runnel/internal/testport"
	"github.com/runnel/runnel/raftfsm"
)

// TestRaftLogWriteFailureStopsNode: when the next raft log segment cannot be
// created (as with EMFILE in issue 19's 100,000-partition run; here its
// directory is gone), raft-wal refuses every later append. The node reports
// that on Failed, with the cause, instead of running on with its metadata
// frozen, and Close still returns.
func TestRaftLogWriteFailureStopsNode(t *testing.T) {
	dir := t.TempDir()
	n, err := Open(Config{NodeID: 1, Dir: dir, BindAddr: testport.FreeAddr(t),
		RaftLogSegmentBytes: 4 << 10}) // a rotation every few dozen entries
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			_ = n.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Apply(ctx, raftfsm.Command{AllocateProducerIDs: &raftfsm.AllocateProducerIDs{Count: 1}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-n.Failed():
		t.Fatalf("failed before any fault: %v", n.Failure())
	default:
	}
	// The open segment stays writable (its file is open); the next one
	// cannot be created.
	if err := os.Rename(filepath.Join(dir, dirRaftLog), filepath.Join(dir, "raftlog.gone")); err != nil {
		t.Fatal(err)
	}
proposing:
	for applied := 0; ; applied++ {
		select {
		case <-n.Failed():
			break proposing
		case <-ctx.Done():
			t.Fatalf("the raft log could not rotate and the node did not report it (%d commands proposed after)", applied)
		default:
		}
		actx, acancel := context.WithTimeout(ctx, 2*time.Second)
		_, _ = n.Apply(actx, raftfsm.Command{AllocateProducerIDs: &raftfsm.AllocateProducerIDs{Count: 1}})
		acancel()
	}
	err = n.Failure()
	if err == nil || !strings.Contains(err.Error(), "append to the raft log") {
		t.Fatalf("Failure() = %v, want the failed append", err)
	}
	done := make(chan error, 1)
	go func() { done <- n.Close() }()
	select {
	case err := <-done:
		closed = true
		t.Logf("close: %v", err) // closing a failed log may report errors; it must return
	case <-time.After(30 * time.Second):
		t.Fatal("Close of a node whose raft log failed did not return")
	}
}
