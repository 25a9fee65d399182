package raftfsm

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// TestFailedFlushStops: a memtable flush that fails on badger's own
// goroutine (here its table file cannot be created: O_EXCL finds the
// names taken) is retried by badger for ever, writes blocking once the
// next memtable fills; nothing returns the error. The state machine
// stops at the first failure instead (Failed, Failure: ErrStateFlushFailed),
// refuses later commands, and its Close returns instead of waiting for
// the flush for ever.
func TestFailedFlushStops(t *testing.T) {
	dir := t.TempDir()
	f := newTestFSM(t, dir)
	var reported []error
	f.OnFailure(func(err error) { reported = append(reported, err) })
	setup(t, f)
	// A fresh store's tables are numbered from 1: their names taken,
	// every flush fails, retried with the next number each second.
	for id := 1; id <= 200; id++ {
		if err := os.MkdirAll(filepath.Join(dir, fmt.Sprintf("%06d.sst", id), "taken"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { // before newTestFSM's cleanup closes badger: its flush can succeed again
		for id := 1; id <= 200; id++ {
			os.RemoveAll(filepath.Join(dir, fmt.Sprintf("%06d.sst", id)))
		}
	})

	// A memtable and a little more (16 MiB in transactions of 512 KiB):
	// one flush, and the next memtable far from full, so no write waits.
	value := bytes.Repeat([]byte{'v'}, 512<<10)
	for i := range (memTableSize + 1<<20) / len(value) {
		err := f.db.Update(func(txn *badger.Txn) error { return txn.Set(fmt.Appendf(nil, "filler/%d", i), value) })
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	select {
	case <-f.Failed():
	case <-time.After(60 * time.Second): // badger logs the failure at once; this is for a loaded machine
		t.Fatal("the state machine did not stop at a failed flush")
	}
	if !errors.Is(f.Failure(), ErrStateFlushFailed) {
		t.Fatalf("failure %v, want ErrStateFlushFailed", f.Failure())
	}
	if r := applyAt(t, f, 5, create("after", []int32{1})); !errors.Is(asError(r), ErrStateFlushFailed) {
		t.Fatalf("a command after the failed flush answered %v, want the failure", r)
	}
	closed := make(chan error, 1)
	go func() { closed <- f.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("close: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Close waits for the failed flush")
	}
	if len(reported) != 1 {
		t.Fatalf("reported %d times, want once", len(reported))
	}
}

// A failure before OnFailure is set (a flush failing while badger opens
// replays and flushes the memtables left by a crash, before quorum sets
// it) still reaches OnFailure's function, once.
func TestFailureBeforeOnFailureReported(t *testing.T) {
	f := newTestFSM(t, t.TempDir())
	fault := fmt.Errorf("%w: injected", ErrStateFlushFailed)
	f.storeFailed(fault)
	f.storeFailed(errors.New("a second failure"))
	var reported []error
	f.OnFailure(func(err error) { reported = append(reported, err) })
	if len(reported) != 1 || !errors.Is(reported[0], fault) {
		t.Fatalf("reported %v, want the failure once", reported)
	}
	if !errors.Is(f.Failure(), fault) {
		t.Fatalf("Failure %v, want the first failure", f.Failure())
	}
}
