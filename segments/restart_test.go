package segments

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/runnel/runnel/segments/vfs"
)

// logView is what a test compares of a log: its offsets, segment bases,
// batches from its start on and leader epochs.
type logView struct {
	start, end int64
	bases      []int64
	data       []byte
	epochs     []epochEntry
}

func viewOf(t *testing.T, l *Log) logView {
	t.Helper()
	v := logView{start: l.StartOffset(), end: l.EndOffset(), bases: segmentBases(l)}
	v.data = readAll(t, l, v.start, 1<<20)
	l.mu.Lock()
	v.epochs = slices.Clone(l.epochs)
	l.mu.Unlock()
	return v
}

func (v logView) equal(w logView) bool {
	return v.start == w.start && v.end == w.end && slices.Equal(v.bases, w.bases) &&
		bytes.Equal(v.data, w.data) && slices.Equal(v.epochs, w.epochs)
}

// emptyAt says v is a log emptied and restarted at off: one segment at
// off, no batch, no epoch.
func (v logView) emptyAt(off int64) bool {
	return v.start == off && v.end == off && slices.Equal(v.bases, []int64{off}) && len(v.data) == 0 && len(v.epochs) == 0
}

func (v logView) String() string {
	return fmt.Sprintf("[%d, %d) segments %v, %d bytes, epochs %v", v.start, v.end, v.bases, len(v.data), v.epochs)
}

// TestRestartPowerCutAnywhere: a power cut before any filesystem step of
// a Reset, or of a Truncate below the log start offset (both empty the log
// and restart it at a new start offset), leaves a log that opens as the old
// one (start, end, segments, batches and leader epochs) or as the new empty
// one at the new start offset, and opens the same way again: never the old
// segments under the new start offset. Torn unsynced tails included; the
// log is synced before, open since its last write or reopened after a
// clean close.
func TestRestartPowerCutAnywhere(t *testing.T) {
	type restart struct {
		name string
		// to returns the offset the log restarts at, from the old log's
		// first segment base and start and end offsets.
		to func(base, start, end int64) int64
		do func(l *Log, to int64) error
	}
	reset := func(l *Log, to int64) error { return l.Reset(to) }
	truncate := func(l *Log, to int64) error { return l.Truncate(to) }
	restarts := []restart{
		{"reset past the end", func(_, _, end int64) int64 { return end + 50 }, reset},
		{"reset inside the log", func(_, start, end int64) int64 { return (start + end) / 2 }, reset},
		{"reset below the start", func(base, start, _ int64) int64 { return start - 1 }, reset},
		{"reset at the first base", func(base, _, _ int64) int64 { return base }, reset},
		{"reset below the first base", func(base, _, _ int64) int64 { return base - 3 }, reset},
		{"truncate below the start", func(_, start, _ int64) int64 { return start - 1 }, truncate},
		{"truncate at the first base", func(base, _, _ int64) int64 { return base }, truncate},
		{"truncate below the first base", func(base, _, _ int64) int64 { return base - 3 }, truncate},
	}
	for _, rs := range restarts {
		for _, reopened := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/reopened=%v", rs.name, reopened), func(t *testing.T) {
				const dir = "/rs/p"
				mem := vfs.NewMemFS()
				cuts := &powerCuts{mem: mem, rng: rand.New(rand.NewPCG(19, 8))}
				efs := vfs.NewErrorFS(mem, cuts.injector)
				cfg := DefaultConfig()
				cfg.SegmentBytes = 600
				cfg.IndexIntervalBytes = 150
				l := mustOpen(t, dir, cfg, Options{FS: efs})
				defer func() { l.Close() }()
				for i := range 30 {
					mustAppend(t, l, valueBatch(1+i%3, 40, int64(i)), int32(i/10))
				}
				// The first segments go, and the start is left inside a
				// segment, above its base.
				bases := segmentBases(l)
				if len(bases) < 5 {
					t.Fatalf("setup: %d segments, want 5 or more", len(bases))
				}
				if err := l.DeleteRecordsBefore(bases[2] + 2); err != nil {
					t.Fatal(err)
				}
				if err := l.Sync(); err != nil {
					t.Fatal(err)
				}
				if reopened {
					if err := l.Close(); err != nil {
						t.Fatal(err)
					}
					l = mustOpen(t, dir, cfg, Options{FS: efs})
				}
				old := viewOf(t, l)
				to := rs.to(bases[2], old.start, old.end)
				if to < 0 || old.start <= bases[2] {
					t.Fatalf("setup: restart at %d, log %v", to, old)
				}
				cuts.start()
				if err := rs.do(l, to); err != nil {
					t.Fatal(err)
				}
				cuts.stop("after it")
				if v := viewOf(t, l); !v.emptyAt(to) {
					t.Fatalf("after restarting at %d: %v", to, v)
				}
				sawOld, sawNew := false, false
				images := cuts.take()
				for i, c := range images {
					var first logView
					for open := range 2 {
						l2 := mustOpen(t, dir, cfg, Options{FS: c.fs})
						v := viewOf(t, l2)
						if err := l2.Close(); err != nil {
							t.Fatal(err)
						}
						switch {
						case v.equal(old):
							sawOld = true
						case v.emptyAt(to):
							sawNew = true
						default:
							t.Fatalf("power cut before %s (%d of %d), open %d: %v; want the old log %v or empty at %d", c.at, i, len(images), open+1, v, old, to)
						}
						if open == 0 {
							first = v
						} else if !v.equal(first) {
							t.Fatalf("power cut before %s: opened as %v, then as %v", c.at, first, v)
						}
					}
				}
				if !sawOld || !sawNew {
					t.Fatalf("%d power cuts: old log seen %v, new one %v; want both", len(images), sawOld, sawNew)
				}
			})
		}
	}
}

// TestResetFailedThenRecovered: a Reset whose segment removals fail leaves
// the log refusing changes with old segments on disk under a state file
// that says a restart is under way; Recover finishes it in place: the log
// is empty at the new start, takes appends there and reopens so.
func TestResetFailedThenRecovered(t *testing.T) {
	const dir = "/rs/p"
	mem := vfs.NewMemFS()
	efs := vfs.NewErrorFS(mem, nil)
	cfg := DefaultConfig()
	cfg.SegmentBytes = 600
	l := mustOpen(t, dir, cfg, Options{FS: efs})
	defer func() { l.Close() }()
	for i := range 20 {
		mustAppend(t, l, valueBatch(2, 40, int64(i)), 1)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	const to = 25
	efs.SetInjector(vfs.FailAfter(vfs.OpRemove, 1, nil))
	if err := l.Reset(to); err == nil {
		t.Fatal("reset with failing removals succeeded")
	}
	efs.SetInjector(nil)
	if err := l.Recover(); err != nil {
		t.Fatalf("recover: %v", err)
	}
	if v := viewOf(t, l); !v.emptyAt(to) {
		t.Fatalf("recovered after a failed reset to %d: %v", to, v)
	}
	if info := mustAppend(t, l, valueBatch(1, 10, 1), 2); info.BaseOffset != to {
		t.Fatalf("append after recovery at %d, want %d", info.BaseOffset, to)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, dir, cfg, Options{FS: efs})
	if start, end := l.StartOffset(), l.EndOffset(); start != to || end != to+1 {
		t.Fatalf("reopened [%d, %d), want [%d, %d)", start, end, to, to+1)
	}
}
