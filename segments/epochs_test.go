package segments

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runnel/runnel/recordbatch"

	"github.com/runnel/runnel/segments/vfs"
)

// countSyncs returns an injector counting fsyncs (files and directories)
// and file creations, failing none.
func countSyncs(syncs, creates *atomic.Int64) vfs.Injector {
	return func(op vfs.Op, path string) error {
		switch op {
		case vfs.OpSync, vfs.OpSyncDir:
			syncs.Add(1)
		case vfs.OpCreate:
			creates.Add(1)
		}
		return nil
	}
}

// TestNewEpochCostsNoFsync: the first append of a new leader epoch, on a
// leader (Append) and on a follower (AppendReplicated), does no fsync and
// writes no file: a broker taking over thousands of partitions after a
// crash assigns that many epochs at once.
func TestNewEpochCostsNoFsync(t *testing.T) {
	const dir = "/e/p"
	mem := vfs.NewMemFS()
	efs := vfs.NewErrorFS(mem, nil)
	l := mustOpen(t, dir, DefaultConfig(), Options{FS: efs})
	defer l.Close()
	mustAppend(t, l, valueBatch(2, 10, 1), 1)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	var syncs, creates atomic.Int64
	efs.SetInjector(countSyncs(&syncs, &creates))
	mustAppend(t, l, valueBatch(2, 10, 2), 2)
	if n, c := syncs.Load(), creates.Load(); n != 0 || c != 0 {
		t.Fatalf("leader: a new epoch's first append did %d fsyncs and created %d files, want none", n, c)
	}
	efs.SetInjector(nil)

	// A follower copies the leader's batches as they are, epochs included.
	fdir := "/e/f"
	f := mustOpen(t, fdir, DefaultConfig(), Options{FS: efs})
	defer f.Close()
	b := valueBatch(2, 10, 3)
	if _, err := f.AppendReplicated(stamp(b, 0, 1)); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	syncs.Store(0)
	creates.Store(0)
	efs.SetInjector(countSyncs(&syncs, &creates))
	if _, err := f.AppendReplicated(stamp(valueBatch(2, 10, 4), 2, 3)); err != nil {
		t.Fatal(err)
	}
	if n, c := syncs.Load(), creates.Load(); n != 0 || c != 0 {
		t.Fatalf("follower: a new epoch's first append did %d fsyncs and created %d files, want none", n, c)
	}
	efs.SetInjector(nil)
	if e, end, _ := f.EndOffsetForEpoch(1); e != 1 || end != 2 {
		t.Fatalf("follower: epoch 1 ends %d/%d, want 1/2", e, end)
	}
}

// stamp sets a test batch's base offset and leader epoch, as a leader's
// Append would have.
func stamp(b []byte, base int64, epoch int32) []byte {
	recordbatch.SetBaseOffset(b, base)
	recordbatch.SetEpoch(b, epoch)
	return b
}

// encodeEpochs writes the leader-epoch-checkpoint file of the previous
// release (Kafka's text format), for the upgrade tests and fuzz seeds.
func encodeEpochs(es []epochEntry) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "0\n%d\n", len(es))
	for _, e := range es {
		fmt.Fprintf(&b, "%d %d\n", e.Epoch, e.Start)
	}
	return b.Bytes()
}

// checkEpochsMatchBatches checks every EndOffsetForEpoch answer of l
// against a model built from the batches l holds: an epoch starts at the
// first batch carrying it that is newer than every epoch before it, moved up
// to the log start offset (what a log that lost nothing says).
func checkEpochsMatchBatches(t *testing.T, l *Log, what string) {
	t.Helper()
	m := model{start: l.StartOffset(), end: l.EndOffset()}
	maxEpoch := int32(-1)
	for off := m.start; off < m.end; {
		b := readAll(t, l, off, 1<<20)
		if len(b) == 0 {
			break
		}
		for len(b) > 0 {
			h, err := recordbatch.Check(b, 0, recordbatch.CountCompacted)
			if err != nil {
				t.Fatalf("%s: bad batch at %d: %v", what, off, err)
			}
			if k := len(m.epochs); h.Epoch >= 0 && (k == 0 || h.Epoch > m.epochs[k-1].Epoch) {
				m.epochs = append(m.epochs, epochEntry{Epoch: h.Epoch, Start: max(h.BaseOffset, m.start)})
			}
			maxEpoch = max(maxEpoch, h.Epoch)
			off = h.NextOffset()
			b = b[h.Size:]
		}
	}
	for e := int32(-1); e <= maxEpoch+1; e++ {
		ge, gend, err := l.EndOffsetForEpoch(e)
		if we, wend := m.endForEpoch(e); err != nil || ge != we || gend != wend {
			t.Fatalf("%s: epoch %d ends %d/%d (%v), its batches say %d/%d (epochs %v, log [%d, %d), log epochs %v)", what, e, ge, gend, err, we, wend, m.epochs, m.start, m.end, l.epochs)
		}
	}
}

// TestEpochsAfterPowerCutAnywhere runs appends in several leader epochs
// (some with an older epoch, which starts none), syncs, rolls,
// truncations, delete-records and clean reopens on a filesystem that
// records a power cut before every operation (torn unsynced tails
// included), and opens each: its EndOffsetForEpoch answers must match the
// batches that survived. The epochs are in no file of their own, so this is
// what shows the state file holds the entries below its recovery point and
// recovery takes the rest from the batches.
func TestEpochsAfterPowerCutAnywhere(t *testing.T) {
	steps := 300
	if testing.Short() {
		steps = 120
	}
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			const dir = "/pc/p"
			rng := rand.New(rand.NewPCG(seed, 5))
			mem := vfs.NewMemFS()
			cuts := &powerCuts{mem: mem, rng: rand.New(rand.NewPCG(seed, 6))}
			cuts.start()
			efs := vfs.NewErrorFS(mem, cuts.injector)
			cfg := DefaultConfig()
			cfg.SegmentBytes = 900
			cfg.IndexIntervalBytes = 150
			l := mustOpen(t, dir, cfg, Options{FS: efs})
			defer func() { l.Close() }()
			epoch := int32(0)
			opened := 0
			check := func(op string) {
				imgs := cuts.take()
				for i, c := range imgs {
					st, _ := readFile(c.fs, dir+"/"+stateFile)
					names, _ := c.fs.List(dir)
					l2, err := Open(dir, cfg, Options{FS: c.fs})
					if err != nil {
						t.Fatalf("after %s, power cut %d (before %s): open: %v", op, i, c.at, err)
					}
					checkEpochsMatchBatches(t, l2, fmt.Sprintf("after %s, power cut %d of %d before %s (state file %q, files %v)", op, i, len(imgs), c.at, st, names))
					l2.Close()
					opened++
				}
			}
			for step := 0; step < steps; step++ {
				var op string
				switch x := rng.IntN(100); {
				case x < 60:
					if rng.IntN(6) == 0 {
						epoch++
					}
					e := epoch
					if rng.IntN(15) == 0 && e > 0 {
						e-- // a deposed leader's late append: starts no epoch
					}
					mustAppend(t, l, valueBatch(1+rng.IntN(3), 20+rng.IntN(60), int64(step)), e)
					op = fmt.Sprint("append in epoch ", e)
				case x < 70:
					if err := l.Sync(); err != nil {
						t.Fatal(err)
					}
					op = "sync"
				case x < 78:
					if err := l.Roll(); err != nil {
						t.Fatal(err)
					}
					op = "roll"
				case x < 88:
					start, end := l.StartOffset(), l.EndOffset()
					to := start + rng.Int64N(end-start+1)
					if err := l.Truncate(to); err != nil {
						t.Fatal(err)
					}
					op = fmt.Sprint("truncate ", to)
				case x < 92:
					start, end := l.StartOffset(), l.EndOffset()
					off := start + rng.Int64N(end-start+1)
					if err := l.DeleteRecordsBefore(off); err != nil {
						t.Fatal(err)
					}
					op = fmt.Sprint("delete records before ", off)
				default:
					if err := l.Close(); err != nil {
						t.Fatal(err)
					}
					l = mustOpen(t, dir, cfg, Options{FS: efs})
					op = "reopen"
				}
				checkEpochsMatchBatches(t, l, op)
				check(op)
			}
			t.Logf("%d power cuts opened", opened)
		})
	}
}

// writeV1State writes a state file as the previous release did (version 1,
// no epochs) and its leader-epoch-checkpoint file.
func writeV1State(t *testing.T, fs vfs.FS, dir string, st logState, es []epochEntry) {
	t.Helper()
	b := fmt.Appendf(nil, "runnel-log-state 1\nrecovery-point %d\nstart-offset %d\n", st.RecoveryPoint, st.StartOffset)
	if st.Clean {
		b = fmt.Appendf(b, "clean %d %d %d\n", st.End, st.ActiveBase, st.ActiveSize)
	}
	b = append(b, "end\n"...)
	if err := writeFileAtomic(fs, dir, stateFile, b); err != nil {
		t.Fatal(err)
	}
	if err := writeFileAtomic(fs, dir, epochsFile, encodeEpochs(es)); err != nil {
		t.Fatal(err)
	}
}

// TestUpgradeFromEpochFile: a directory of the previous release (a
// version-1 state file, clean or not, and the leader-epoch-checkpoint file
// beside it) opens with its epochs, including those of segments below the
// recovery point that recovery does not read; the first state file written
// after holds them and the old file goes; an old file found beside a
// version-2 state file (its removal lost to a crash) is ignored.
func TestUpgradeFromEpochFile(t *testing.T) {
	for _, clean := range []bool{true, false} {
		t.Run(fmt.Sprint("clean=", clean), func(t *testing.T) {
			const dir = "/u/p"
			mem := vfs.NewMemFS()
			cfg := DefaultConfig()
			cfg.SegmentBytes = 600
			l := mustOpen(t, dir, cfg, Options{FS: mem})
			for i := range 30 {
				mustAppend(t, l, valueBatch(2, 40, int64(i)), int32(1+i/7))
			}
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			want := slices.Clone(l.epochs)
			st := logState{RecoveryPoint: l.RecoveryPoint(), StartOffset: l.StartOffset()}
			if !clean {
				st.RecoveryPoint = segmentBases(l)[2] // segments 0 and 1 are not read
			}
			if clean {
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
				l.mu.Lock()
				s := l.active()
				st.Clean, st.End, st.ActiveBase, st.ActiveSize = true, l.end, s.base, s.size
				l.mu.Unlock()
			} else {
				abandon(l)
			}
			writeV1State(t, mem, dir, st, want)
			efs := vfs.NewErrorFS(mem, func(op vfs.Op, path string) error {
				if clean && (op == vfs.OpRead || op == vfs.OpOpen) && strings.HasSuffix(path, logSuffix) {
					return vfs.ErrInjected // a clean open reads no segment
				}
				return nil
			})
			l = mustOpen(t, dir, cfg, Options{FS: efs})
			efs.SetInjector(nil)
			if !slices.Equal(l.epochs, want) {
				t.Fatalf("opened with epochs %v, want %v", l.epochs, want)
			}
			checkEpochsMatchBatches(t, l, "after the upgrade")
			mustAppend(t, l, valueBatch(1, 10, 99), 9)
			want = append(want, epochEntry{Epoch: 9, Start: l.EndOffset() - 1})
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if names, _ := mem.List(dir); slices.Contains(names, epochsFile) {
				t.Fatalf("the old epoch file is still there after a state file of version 2: %v", names)
			}
			// A crash that loses the removal: the old file, stale, is back.
			if err := writeFileAtomic(mem, dir, epochsFile, encodeEpochs([]epochEntry{{Epoch: 1, Start: 0}})); err != nil {
				t.Fatal(err)
			}
			for _, fs := range []vfs.FS{mem, mem.Crash(nil)} {
				l = mustOpen(t, dir, cfg, Options{FS: fs})
				if !slices.Equal(l.epochs, want) {
					t.Fatalf("reopened with epochs %v, want %v", l.epochs, want)
				}
				l.Close()
			}
		})
	}
}

// TestEpochsSurviveCompactionPastTheSavedRecoveryPoint: after an unclean
// open the state file's recovery point lags behind sealed segments, and
// recovery takes the epochs past it from their batches. Compaction must
// not rewrite those first: the batch that started an epoch may be one it
// drops (a key written again), and a crash after it, before the next state
// file, would move the epoch's start to the next batch kept. Compaction
// saves the state file first.
func TestEpochsSurviveCompactionPastTheSavedRecoveryPoint(t *testing.T) {
	const dir = "/c/p"
	mem := vfs.NewMemFS()
	efs := vfs.NewErrorFS(mem, nil)
	cfg := DefaultConfig()
	cfg.CleanupPolicy = "compact"
	l := mustOpen(t, dir, cfg, Options{FS: efs})
	mustAppend(t, l, buildBatch([]rec{{key: []byte("a"), value: []byte("1"), ts: 1}}), 1)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	// Epoch 2 starts with a record of key x that the next one replaces.
	mustAppend(t, l, buildBatch([]rec{{key: []byte("x"), value: []byte("2"), ts: 2}}), 2)
	mustAppend(t, l, buildBatch([]rec{{key: []byte("x"), value: []byte("3"), ts: 3}}), 2)
	// The roll's flush fails: the state file keeps its old recovery point
	// below the sealed segment.
	efs.SetInjector(func(op vfs.Op, path string) error {
		if op == vfs.OpSync && strings.HasSuffix(path, logSuffix) {
			return vfs.ErrInjected
		}
		return nil
	})
	if err := l.Roll(); err != nil {
		t.Fatal(err)
	}
	l.Close()
	efs.SetInjector(nil)
	l = mustOpen(t, dir, cfg, Options{FS: efs})
	if e, end, _ := l.EndOffsetForEpoch(1); e != 1 || end != 1 {
		t.Fatalf("after the unclean open epoch 1 ends %d/%d, want 1/1", e, end)
	}
	// The state file written after the pass (Maintain's checkpoint) is lost:
	// a crash comes first.
	l.compactHook = func() {
		efs.SetInjector(func(op vfs.Op, path string) error {
			if strings.Contains(path, stateFile) {
				return vfs.ErrInjected
			}
			return nil
		})
	}
	_ = l.Maintain(time.UnixMilli(10)) // fails at the checkpoint
	efs.SetInjector(nil)
	if got := decodeBatches(t, readAll(t, l, 0, 1<<20)); len(got) != 2 {
		t.Fatalf("compaction left %d batches, want 2 (the replaced record gone)", len(got))
	}
	abandon(l) // a crash, the page cache intact
	l = mustOpen(t, dir, cfg, Options{FS: mem})
	defer l.Close()
	if e, end, _ := l.EndOffsetForEpoch(1); e != 1 || end != 1 {
		t.Fatalf("after compaction and a crash epoch 1 ends %d/%d, want 1/1", e, end)
	}
}

// TestEpochsToTrimMatchesTheTrim: Maintain skips its full pass when
// epochsToTrimLocked says the epochs need no trim, so it must say yes
// exactly when trimEpochsLocked changes them (TestMaintainDue did not
// notice the epoch check left out).
func TestEpochsToTrimMatchesTheTrim(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20_000 {
		var es []epochEntry
		start := int64(0)
		for e := range rng.IntN(5) {
			start += rng.Int64N(4)
			es = append(es, epochEntry{Epoch: int32(e), Start: start})
		}
		l := &Log{epochs: slices.Clone(es), start: rng.Int64N(12), end: rng.Int64N(14)}
		want := l.epochsToTrimLocked()
		l.trimEpochsLocked()
		if changed := !slices.Equal(l.epochs, es); changed != want {
			t.Fatalf("epochs %v, start %d, end %d: epochsToTrimLocked %v, the trim changed them: %v (to %v)", es, l.start, l.end, want, changed, l.epochs)
		}
	}
}
