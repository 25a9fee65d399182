package raftfsm

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

// A memtable file left empty by a process killed while creating it must not
// keep the node from starting again.
func TestOpenBadgerAfterInterruptedMemtable(t *testing.T) {
	dir := t.TempDir()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	db, err := OpenBadger(dir, true, log)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(txn *badger.Txn) error { return txn.Set([]byte("k"), []byte("v")) }); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "00009.mem"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	db, err = OpenBadger(dir, true, log)
	if err != nil {
		t.Fatalf("reopen after an empty memtable file: %v", err)
	}
	defer db.Close()
	err = db.View(func(txn *badger.Txn) error {
		_, err := txn.Get([]byte("k"))
		return err
	})
	if err != nil {
		t.Fatalf("data lost: %v", err)
	}
}
