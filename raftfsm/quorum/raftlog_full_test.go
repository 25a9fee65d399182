package quorum

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/runnel/runnel/internal/disktest"
)

// fullDiskEntry is an entry of a few hundred bytes: a 16 KiB segment takes
// a few dozen of them.
func fullDiskEntry(i uint64) *raft.Log {
	return &raft.Log{Index: i, Term: 2, Type: raft.LogCommand, Data: bytes.Repeat([]byte{byte(i)}, 300)}
}

// TestRaftLogResumesAfterDiskFull (issue 19): the append that seals a
// segment writes past the segment's preallocated size; on a full disk it
// fails with the segment's index frame written and no commit frame after
// it. raft-wal then recovers that segment as sealed while its metadata says
// it is the open tail, and refuses every later append ("segment is
// sealed"), even once space is back: the node could never start again.
// Opened again with space back, the log takes appends, keeps every entry
// acknowledged before the failure and the stable keys, and still does after
// a further restart.
func TestRaftLogResumesAfterDiskFull(t *testing.T) {
	mnt := filepath.Join(t.TempDir(), "mnt")
	disktest.MountTmpfs(t, mnt, 1<<20)
	const segmentBytes = 16 << 10
	var logs bytes.Buffer
	open := func() *raftLog {
		t.Helper()
		w, err := openRaftLog(mnt, segmentBytes, slog.New(slog.NewTextHandler(&logs, nil)))
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	w := open()
	if err := w.SetUint64([]byte("CurrentTerm"), 2); err != nil {
		t.Fatal(err)
	}
	if err := w.Set([]byte("LastVoteCand"), []byte("node-a")); err != nil {
		t.Fatal(err)
	}
	ballast := filepath.Join(mnt, "ballast")
	disktest.FillDisk(t, ballast)
	var acked uint64
	var appendErr error
	for i := uint64(1); i < 10_000; i++ {
		if appendErr = w.StoreLog(fullDiskEntry(i)); appendErr != nil {
			break
		}
		acked = i
	}
	if appendErr == nil || acked == 0 {
		t.Fatalf("appends on a full disk: %d acknowledged, then %v; want some, then a failure", acked, appendErr)
	}
	_ = w.Close() // the failed node exits: its close may fail too
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}

	check := func(w *raftLog, last uint64) {
		t.Helper()
		if got, err := w.LastIndex(); err != nil || got != last {
			t.Fatalf("last index %d %v, want %d", got, err, last)
		}
		for i := uint64(1); i <= last; i++ {
			var l raft.Log
			if err := w.GetLog(i, &l); err != nil || !bytes.Equal(l.Data, fullDiskEntry(i).Data) || l.Term != 2 {
				t.Fatalf("entry %d: %+v %v", i, l, err)
			}
		}
		if v, err := w.GetUint64([]byte("CurrentTerm")); err != nil || v != 2 {
			t.Fatalf("CurrentTerm %d %v, want 2", v, err)
		}
		if v, err := w.Get([]byte("LastVoteCand")); err != nil || string(v) != "node-a" {
			t.Fatalf("LastVoteCand %q %v, want node-a", v, err)
		}
	}
	w = open()
	check(w, acked)
	next := acked + 1
	for i := next; i < next+100; i++ { // past another segment
		if err := w.StoreLog(fullDiskEntry(i)); err != nil {
			w.Close()
			t.Fatalf("append %d after the disk-full failure (entries 1-%d acknowledged), space back: %v", i, acked, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w = open()
	defer w.Close()
	check(w, next+99)
	checkNoRebuildLeft(t, filepath.Join(mnt, dirRaftLog))
	if c := strings.Count(logs.String(), "rebuilding the log"); c != 1 {
		t.Fatalf("the rebuild logged %d times, want once:\n%s", c, logs.String())
	}
}

func checkNoRebuildLeft(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.Contains(e.Name(), rebuilt) {
			t.Errorf("left behind: %s", e.Name())
		}
	}
}

// TestRaftLogRebuildInterrupted: a crash during a rebuild leaves the old
// log whole before the copy is complete (an unfinished copy is dropped),
// and after it the next open completes the swap, even half done.
func TestRaftLogRebuildInterrupted(t *testing.T) {
	quiet := slog.New(slog.DiscardHandler)
	write := func(dir string, n uint64) {
		t.Helper()
		w, err := openWAL(dir, 0, quiet)
		if err != nil {
			t.Fatal(err)
		}
		for i := uint64(1); i <= n; i++ {
			if err := w.StoreLog(fullDiskEntry(i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.SetUint64([]byte("CurrentTerm"), n); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	check := func(t *testing.T, dir string, want uint64) {
		t.Helper()
		w, err := openRaftLog(dir, 0, quiet)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		if last, err := w.LastIndex(); err != nil || last != want {
			t.Fatalf("last index %d %v, want %d", last, err, want)
		}
		if term, err := w.GetUint64([]byte("CurrentTerm")); err != nil || term != want {
			t.Fatalf("CurrentTerm %d %v, want %d", term, err, want)
		}
		var l raft.Log
		if err := w.GetLog(want, &l); err != nil || !bytes.Equal(l.Data, fullDiskEntry(want).Data) {
			t.Fatalf("entry %d: %+v %v", want, l, err)
		}
		checkNoRebuildLeft(t, filepath.Join(dir, dirRaftLog))
	}
	t.Run("before the commit", func(t *testing.T) {
		dir := t.TempDir()
		log := filepath.Join(dir, dirRaftLog)
		write(log, 5)
		write(filepath.Join(log, rebuiltTmp), 8)
		check(t, dir, 5)
	})
	t.Run("after the commit, half swapped", func(t *testing.T) {
		dir := t.TempDir()
		log := filepath.Join(dir, dirRaftLog)
		write(log, 5)
		copy := filepath.Join(log, rebuilt)
		write(copy, 8)
		// The first file linked over, a second one staged.
		entries, err := os.ReadDir(copy)
		if err != nil || len(entries) < 2 {
			t.Fatalf("rebuilt copy: %v %v", entries, err)
		}
		if err := os.Remove(filepath.Join(log, entries[0].Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		if err := os.Link(filepath.Join(copy, entries[0].Name()), filepath.Join(log, entries[0].Name())); err != nil {
			t.Fatal(err)
		}
		if err := os.Link(filepath.Join(copy, entries[1].Name()), filepath.Join(log, entries[1].Name()+".rebuilt")); err != nil {
			t.Fatal(err)
		}
		check(t, dir, 8)
	})
}
