package quorum

import (
	"context"
	"testing"
	"time"

	"github.com/runnel/runnel/internal/testport"
	"github.com/runnel/runnel/raftfsm"
)

// With a small threshold and interval raft snapshots by itself and trims
// the log behind the snapshot, keeping TrailingLogs entries.
func TestAutomaticSnapshotTrimsLog(t *testing.T) {
	addr := testport.FreeAddr(t)
	n, err := Open(Config{NodeID: 1, Dir: t.TempDir(), BindAddr: addr,
		SnapshotThreshold: 4, SnapshotInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		if _, err := n.Apply(ctx, raftfsm.Command{AllocateProducerIDs: &raftfsm.AllocateProducerIDs{Count: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		first, _ := n.logs.FirstIndex()
		last, _ := n.logs.LastIndex()
		if first > 1 && last-first < 4+8 { // trailing logs plus what came since
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("log not trimmed: first %d last %d", first, last)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
