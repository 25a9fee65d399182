package quorum

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/runnel/runnel/internal/testport"
	"github.com/runnel/runnel/raftfsm"
)

// raftStableKeys are the keys hashicorp/raft keeps in its StableStore.
var raftStableKeys = []string{"CurrentTerm", "LastVoteTerm", "LastVoteCand"}

// toBadgerLog turns dir's raft-wal log back into the badger store of older
// versions (dir/raft), as a node written by one of them has it on disk.
func toBadgerLog(t *testing.T, dir string, extra ...*raft.Log) {
	t.Helper()
	w, err := openWAL(filepath.Join(dir, dirRaftLog), 0, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, dirRaft)); err != nil { // the marker
		t.Fatal(err)
	}
	db, err := raftfsm.OpenBadger(filepath.Join(dir, dirRaft), true, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	old := &logStore{db: db}
	for _, k := range raftStableKeys {
		var err error
		if raftUint64Keys[k] {
			var v uint64
			if v, err = w.GetUint64([]byte(k)); err == nil {
				err = old.SetUint64([]byte(k), v)
			}
		} else if v, gerr := w.Get([]byte(k)); gerr == nil && len(v) > 0 {
			err = old.Set([]byte(k), v)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	first, _ := w.FirstIndex()
	last, _ := w.LastIndex()
	for i := first; i <= last && last > 0; i++ {
		l := new(raft.Log)
		if err := w.GetLog(i, l); err != nil {
			t.Fatal(err)
		}
		extra = append(extra, l)
	}
	for _, l := range extra {
		if err := old.StoreLog(l); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, dirRaftLog)); err != nil {
		t.Fatal(err)
	}
}

func openTestNode(t *testing.T, dir string) *Node {
	t.Helper()
	n, err := Open(Config{NodeID: 1, Dir: dir, BindAddr: testport.FreeAddr(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRaftLogMovesFromBadger: a node whose raft log is still in badger
// (written by a version before raft-wal) starts with the same log, term and
// metadata, and the badger store is gone.
func TestRaftLogMovesFromBadger(t *testing.T) {
	dir := t.TempDir()
	n := openTestNode(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := n.Apply(ctx, raftfsm.Command{RegisterBroker: &raftfsm.RegisterBroker{ID: 1}}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b", "c"} {
		if _, err := n.Apply(ctx, raftfsm.Command{CreateTopic: &raftfsm.CreateTopic{Name: name, Partitions: 1, ReplicationFactor: 1,
			Assignments: [][]int32{{1}}}}); err != nil {
			t.Fatal(err)
		}
	}
	img, _ := n.Image()
	want, wantIndex := img.Digest(), img.Index
	term := n.raft.CurrentTerm()
	last, _ := n.logs.LastIndex()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	toBadgerLog(t, dir)

	n = openTestNode(t, dir)
	img, _ = n.Image()
	if img.Digest() != want || img.Index != wantIndex || img.Topics.Get("c") == nil {
		t.Fatalf("after the move: index %d (want %d), %d topics, digest equal %v", img.Index, wantIndex, img.Topics.Len(), img.Digest() == want)
	}
	if got := n.raft.CurrentTerm(); got != term+1 { // one election since
		t.Fatalf("term %d after the move, was %d", got, term)
	}
	if got, _ := n.logs.LastIndex(); got <= last {
		t.Fatalf("last index %d after the move and a new term, was %d", got, last)
	}
	if _, err := n.Apply(ctx, raftfsm.Command{DeleteTopic: &raftfsm.DeleteTopic{Name: "a"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, dirRaftLogTmp)); !os.IsNotExist(err) {
		t.Fatalf("%s after the move: %v", dirRaftLogTmp, err)
	}
	checkMarker(t, dir)
}

// checkMarker: dir/raft is the marker file, which an older release fails
// to open as its badger directory.
func checkMarker(t *testing.T, dir string) {
	t.Helper()
	if b, err := os.ReadFile(filepath.Join(dir, dirRaft)); err != nil || string(b) != movedMarker {
		t.Fatalf("marker %s: %q %v", dirRaft, b, err)
	}
	if db, err := raftfsm.OpenBadger(filepath.Join(dir, dirRaft), true, slog.New(slog.DiscardHandler)); err == nil {
		_ = db.Close()
		t.Fatal("badger opened the marker as its directory")
	}
}

// TestMoveBadgerLogCases: only the entries after a gap move (a store that
// is not monotonic keeps stale entries below an installed snapshot); a move
// interrupted before its rename starts again; a badger store left behind
// after the rename is removed, not moved again.
func TestMoveBadgerLogCases(t *testing.T) {
	logDir := func(t *testing.T, dir string) *logStore {
		// Replaces the marker, if any: a crash right after the rename
		// leaves the badger directory where it is.
		if err := os.RemoveAll(filepath.Join(dir, dirRaft)); err != nil {
			t.Fatal(err)
		}
		db, err := raftfsm.OpenBadger(filepath.Join(dir, dirRaft), true, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		return &logStore{db: db}
	}
	write := func(t *testing.T, dir string, indexes ...uint64) {
		s := logDir(t, dir)
		if err := s.SetUint64([]byte("CurrentTerm"), 9); err != nil {
			t.Fatal(err)
		}
		for _, i := range indexes {
			if err := s.StoreLog(testLog(i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	check := func(t *testing.T, dir string, first, last uint64) {
		t.Helper()
		w, err := openRaftLog(dir, 0, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		f, _ := w.FirstIndex()
		l, _ := w.LastIndex()
		term, _ := w.GetUint64([]byte("CurrentTerm"))
		if f != first || l != last || term != 9 {
			t.Fatalf("first %d last %d term %d, want %d %d 9", f, l, term, first, last)
		}
		for i := first; i <= last; i++ {
			var got raft.Log
			want := testLog(i)
			if err := w.GetLog(i, &got); err != nil || got.Index != i || got.Term != want.Term ||
				string(got.Data) != string(want.Data) || !got.AppendedAt.Equal(want.AppendedAt) {
				t.Fatalf("entry %d: %+v %v", i, got, err)
			}
		}
		checkMarker(t, dir)
	}

	t.Run("gap", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, 1, 2, 3, 300, 301, 302, 303)
		check(t, dir, 300, 303)
	})
	t.Run("interrupted before the rename", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, 5, 6, 7)
		if err := os.MkdirAll(filepath.Join(dir, dirRaftLogTmp), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, dirRaftLogTmp, "wal-meta.db"), []byte("half"), 0o600); err != nil {
			t.Fatal(err)
		}
		check(t, dir, 5, 7)
	})
	t.Run("interrupted after the rename", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, 5, 6, 7)
		check(t, dir, 5, 7)
		write(t, dir, 5, 6, 7, 8) // a stale store must not be moved again
		check(t, dir, 5, 7)
	})
	t.Run("log lost", func(t *testing.T) {
		// The marker without the log it points to: refused, not started
		// with an empty log.
		dir := t.TempDir()
		write(t, dir, 5, 6, 7)
		check(t, dir, 5, 7)
		if err := os.RemoveAll(filepath.Join(dir, dirRaftLog)); err != nil {
			t.Fatal(err)
		}
		if w, err := openRaftLog(dir, 0, slog.New(slog.DiscardHandler)); err == nil {
			_ = w.Close()
			t.Fatal("opened without its log")
		}
	})
	t.Run("new node", func(t *testing.T) {
		dir := t.TempDir()
		w, err := openRaftLog(dir, 0, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		checkMarker(t, dir)
	})
	t.Run("empty", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir)
		w, err := openRaftLog(dir, 0, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		if l, _ := w.LastIndex(); l != 0 {
			t.Fatalf("last index %d", l)
		}
		if v, _ := w.GetUint64([]byte("CurrentTerm")); v != 9 {
			t.Fatalf("term %d", v)
		}
	})
}

// TestRaftLogKeepsLogStoreContract: deleted entries are gone (raft-wal
// alone still reads a deleted prefix from the tail segment, and a leader
// would send them instead of its snapshot); a suffix deleted on a conflict
// stays deleted across a restart and the log takes new entries there
// (raft-wal before v0.4.1 failed to open such a log again).
func TestRaftLogKeepsLogStoreContract(t *testing.T) {
	dir := t.TempDir()
	open := func() *raftLog {
		w, err := openRaftLog(dir, 0, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	w := open()
	var logs []*raft.Log
	for i := uint64(1); i <= 20; i++ {
		logs = append(logs, testLog(i))
	}
	if err := w.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	if err := w.DeleteRange(1, 5); err != nil {
		t.Fatal(err)
	}
	var l raft.Log
	if err := w.GetLog(5, &l); err != raft.ErrLogNotFound {
		t.Fatalf("deleted entry 5 in the tail segment: %v", err)
	}
	if err := w.DeleteRange(16, 20); err != nil {
		t.Fatal(err)
	}
	check := func(w *raftLog) {
		t.Helper()
		var l raft.Log
		for _, i := range []uint64{1, 5, 16, 20} {
			if err := w.GetLog(i, &l); err != raft.ErrLogNotFound {
				t.Fatalf("deleted entry %d: %v", i, err)
			}
		}
		if err := w.GetLog(6, &l); err != nil || l.Index != 6 {
			t.Fatalf("entry 6: %+v %v", l, err)
		}
	}
	check(w)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w = open()
	defer w.Close()
	check(w)
	if f, _ := w.FirstIndex(); f != 6 {
		t.Fatalf("first index %d after a restart, want 6", f)
	}
	if err := w.StoreLog(testLog(16)); err != nil {
		t.Fatal(err)
	}
	if l, _ := w.LastIndex(); l != 16 {
		t.Fatalf("last index %d, want 16", l)
	}
}

// TestRaftLogLargeAppends: appends of the largest entries, together larger
// than a segment, are stored whole and read back after a reopen.
func TestRaftLogLargeAppends(t *testing.T) {
	dir := t.TempDir()
	w, err := openRaftLog(dir, 0, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	entry := func(i uint64) *raft.Log {
		data := make([]byte, maxCommandBytes)
		for j := range data {
			data[j] = byte(i + uint64(j))
		}
		return &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: data}
	}
	var next uint64 = 1
	for _, n := range []int{1, 6, 2} { // 6 MiB in one append: past a segment
		var logs []*raft.Log
		for range n {
			logs = append(logs, entry(next))
			next++
		}
		if err := w.StoreLogs(logs); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if w, err = openRaftLog(dir, 0, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for i := uint64(1); i < next; i++ {
		var l raft.Log
		if err := w.GetLog(i, &l); err != nil || !bytes.Equal(l.Data, entry(i).Data) {
			t.Fatalf("entry %d: %d bytes, %v", i, len(l.Data), err)
		}
	}
}
