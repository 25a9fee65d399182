package raftfsm

import (
	"errors"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/hashicorp/raft"
)

// TestStateStoreWriteFailureStops: a failed write of the state store
// stops the state machine (fail-stop, as a failed write of the raft log
// does): the commands of the batch are answered with the failure, never
// acknowledged; nothing later is applied, even once writes would succeed
// again (raft counts a returned batch as applied: applying the next one
// would skip the failed commands for good); no snapshot is taken past it;
// the failure is reported once (OnFailure, Failed, Failure). A restart
// replays the log from the state's applied index.
func TestStateStoreWriteFailureStops(t *testing.T) {
	dir := t.TempDir()
	f := newTestFSM(t, dir)
	var reported []error
	f.OnFailure(func(err error) { reported = append(reported, err) })
	setup(t, f)
	before, _ := f.Image()

	fault := errors.New("injected: no space left on device")
	f.commitState = func(*badger.DB, uint64, []write) error { return fault }
	res := f.ApplyBatch([]*raft.Log{commandLogAt(t, 5, create("lost", []int32{1})), commandLogAt(t, 6, reg(4, "d"))})
	for i, r := range res {
		if err, ok := r.(error); !ok || !errors.Is(err, fault) {
			t.Fatalf("command %d of the failed batch answered %v, want the write's failure", i, r)
		}
	}
	select {
	case <-f.Failed():
	default:
		t.Fatal("Failed is open after a failed write of the state store")
	}
	if !errors.Is(f.Failure(), fault) || len(reported) != 1 || !errors.Is(reported[0], fault) {
		t.Fatalf("Failure %v, reported %v: want the write's failure, once", f.Failure(), reported)
	}
	if img, _ := f.Image(); img != before || f.AppliedIndex() != 4 {
		t.Fatalf("image index %d, applied %d after the failed batch: want the image and index 4 of before", img.Index, f.AppliedIndex())
	}

	// Writes would work again: still nothing is applied or acknowledged.
	f.commitState = commitWrites
	if r := applyAt(t, f, 7, create("after", []int32{2})); !errors.Is(asError(r), fault) {
		t.Fatalf("a command after the failure answered %v, want the failure", r)
	}
	if img, _ := f.Image(); img != before || f.AppliedIndex() != 4 {
		t.Fatalf("image index %d, applied %d: something applied after the failure", img.Index, f.AppliedIndex())
	}
	if _, err := f.Snapshot(); !errors.Is(err, fault) {
		t.Fatalf("Snapshot after the failure: %v, want the failure", err)
	}
	if len(reported) != 1 {
		t.Fatalf("the failure was reported %d times, want once", len(reported))
	}

	// Restarted, the state machine resumes at its applied index and
	// applies the commands again.
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	f = newTestFSM(t, dir)
	if f.AppliedIndex() != 4 {
		t.Fatalf("restarted at applied index %d, want 4", f.AppliedIndex())
	}
	if r := applyAt(t, f, 5, create("lost", []int32{1})); isErr(r) {
		t.Fatalf("replayed command: %v", r)
	}
	if img, _ := f.Image(); img.Topics.Get("lost") == nil {
		t.Fatal("the replayed topic is missing")
	}
}

func asError(v any) error {
	err, _ := v.(error)
	return err
}
