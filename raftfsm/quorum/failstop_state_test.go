package quorum

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/runnel/runnel/internal/testport"
	"github.com/runnel/runnel/raftfsm"
)

// TestStateStoreWriteFailureStopsNode: a write of the state store that
// fails (here: the store closed under the node, so badger refuses every
// write) stops the node as a failed write of its raft log does: the
// command is answered with the failure, not acknowledged, Failed closes
// with the cause, and Close still returns (raftfsm's failstop.go; the
// wiring is node.go's OnFailure).
func TestStateStoreWriteFailureStopsNode(t *testing.T) {
	n, err := Open(Config{NodeID: 1, Dir: t.TempDir(), BindAddr: testport.FreeAddr(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.WaitReady(ctx); err != nil {
		_ = n.Close()
		t.Fatal(err)
	}
	if _, err := n.Apply(ctx, raftfsm.Command{AllocateProducerIDs: &raftfsm.AllocateProducerIDs{Count: 1}}); err != nil {
		_ = n.Close()
		t.Fatal(err)
	}
	if err := n.fsm.Close(); err != nil { // the state store's badger
		_ = n.Close()
		t.Fatal(err)
	}
	_, err = n.Apply(ctx, raftfsm.Command{AllocateProducerIDs: &raftfsm.AllocateProducerIDs{Count: 1}})
	if err == nil || !strings.Contains(err.Error(), "state store") {
		_ = n.Close()
		t.Fatalf("a command the state store could not take: %v, want its failure", err)
	}
	select {
	case <-n.Failed():
	case <-ctx.Done():
		_ = n.Close()
		t.Fatal("Failed is open after a failed write of the state store")
	}
	if f := n.Failure(); f == nil || !strings.Contains(f.Error(), "write the state store") {
		t.Fatalf("Failure %v, want the state store's write", f)
	}
	if err := n.Close(); err != nil && !errors.Is(err, raftfsm.ErrClosed) {
		t.Logf("close: %v", err)
	}
}
