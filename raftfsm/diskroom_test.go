package raftfsm

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/runnel/runnel/internal/disktest"
)

// TestStateDiskFloor: on a filesystem with less than StateDiskFloor free,
// the state store is not written (badger would write through its
// memory-mapped files and die of SIGBUS, taking the test process with
// it): a batch fail-stops the state machine with ErrStateDiskLow, a
// snapshot restore is refused before it replaces anything, badger is not
// opened; and the state is intact once space is back.
func TestStateDiskFloor(t *testing.T) {
	mnt := filepath.Join(t.TempDir(), "mnt")
	disktest.MountTmpfs(t, mnt, StateDiskFloor+8<<20)
	src := newTestFSM(t, t.TempDir())
	setup(t, src)
	snapshot := snapshotBytes(t, src)

	dir := filepath.Join(mnt, "state")
	f := newTestFSM(t, dir)
	applyAt(t, f, 1, reg(1, "a"))
	ballast := filepath.Join(mnt, "ballast")
	disktest.FillDisk(t, ballast)
	// Cleanups run last first: the ballast goes before newTestFSM's
	// cleanup closes badger.
	t.Cleanup(func() { os.Remove(ballast) })

	r := applyAt(t, f, 2, reg(2, "b"))
	if err, _ := r.(error); !errors.Is(err, ErrStateDiskLow) {
		t.Fatalf("apply on a full disk answered %v, want ErrStateDiskLow", r)
	}
	if !errors.Is(f.Failure(), ErrStateDiskLow) || f.AppliedIndex() != 1 {
		t.Fatalf("failure %v, applied %d: want ErrStateDiskLow at index 1", f.Failure(), f.AppliedIndex())
	}

	// A second store on the full disk: its restore is refused, its
	// state left as it was.
	other := filepath.Join(mnt, "other")
	if _, err := OpenBadger(other, false, slog.New(slog.DiscardHandler)); !errors.Is(err, ErrStateDiskLow) {
		t.Fatalf("OpenBadger on a full disk: %v, want ErrStateDiskLow", err)
	}
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	g := newTestFSM(t, other)
	t.Cleanup(func() { os.Remove(ballast) }) // before g's close too
	applyAt(t, g, 1, reg(7, "x"))
	disktest.FillDisk(t, ballast)
	if err := g.Restore(io.NopCloser(bytes.NewReader(snapshot))); !errors.Is(err, ErrStateDiskLow) {
		t.Fatalf("restore on a full disk: %v, want ErrStateDiskLow", err)
	}
	if img, _ := g.Image(); img.Index != 1 || img.Brokers[7] == nil {
		t.Fatalf("image after the refused restore: index %d, brokers %v; want the state of before", img.Index, img.Brokers)
	}
}
