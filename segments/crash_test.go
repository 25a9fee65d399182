package segments

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runnel/runnel/recordbatch"

	"github.com/runnel/runnel/segments/vfs"
)

// segmentBases returns the base offsets of l's segments.
func segmentBases(l *Log) []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []int64
	for _, s := range l.segs {
		out = append(out, s.base)
	}
	return out
}

// checkIndexes loads every segment of l and compares its indexes, next
// offset and max timestamp with a full rescan of the file.
func checkIndexes(t *testing.T, l *Log) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, s := range l.segs {
		if err := l.loadLocked(s); err != nil {
			t.Fatalf("load segment %d: %v", s.base, err)
		}
		cf, err := l.files.acquire(l.fs, s.path(l.dir))
		if err != nil {
			t.Fatal(err)
		}
		size, _ := cf.f.Size()
		r, err := scanSegment(cf.f, size, s.base, 0, 0, l.cfg.IndexIntervalBytes)
		l.files.release(cf)
		if err != nil || r.stop != nil {
			t.Fatalf("rescan of segment %d: %v %v", s.base, err, r.stop)
		}
		if r.valid != s.size || r.maxTs != s.maxTs || (r.valid > 0 && r.next != s.next) {
			t.Fatalf("segment %d: size/maxTs/next %d/%d/%d, rescan %d/%d/%d", s.base, s.size, s.maxTs, s.next, r.valid, r.maxTs, r.next)
		}
		if !slices.Equal(r.idx.offsets, s.idx.offsets) || r.idx.sinceLast != s.idx.sinceLast {
			t.Fatalf("segment %d (%d of %d): offset index %v, rescan %v", s.base, i, len(l.segs), s.idx.offsets, r.idx.offsets)
		}
		if !slices.Equal(r.idx.times, s.idx.times) {
			t.Fatalf("segment %d: time index %v, rescan %v", s.base, s.idx.times, r.idx.times)
		}
	}
}

// TestCrashCutPoints damages the last segment of a crashed log at 1,000
// random points (cut, garbage appended, flipped byte in the tail batch) and
// checks that reopening keeps exactly the longest valid prefix, rebuilds the
// indexes a rescan would and the leader epochs its batches say, and reads
// nothing below the recovery point.
func TestCrashCutPoints(t *testing.T) {
	const dir = "/data/p0"
	cfg := DefaultConfig()
	cfg.SegmentBytes = 8 << 10
	cfg.IndexIntervalBytes = 300
	mem := vfs.NewMemFS()
	l := mustOpen(t, dir, cfg, Options{FS: mem})
	rng := rand.New(rand.NewPCG(7, 11))
	var batches [][]byte
	for i := 0; i < 80; i++ {
		b := valueBatch(1+rng.IntN(4), 10+rng.IntN(150), int64(1000+i))
		mustAppend(t, l, b, 1+int32(i/10)) // a new leader epoch every 10 batches
		batches = append(batches, b)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	bases := segmentBases(l)
	if len(bases) < 3 {
		t.Fatalf("want several segments, have %d", len(bases))
	}
	img := mem.Crash(nil) // an unclean shutdown with everything synced
	lastBase := bases[len(bases)-1]
	lastPath := filepath.Join(dir, segmentName(lastBase, logSuffix))
	// The batches of the last segment and where each ends in its file.
	var tail [][]byte
	var ends []int
	var before int64 // offsets before the last segment
	for _, b := range batches {
		h := recordbatch.ParseHeader(b)
		if h.BaseOffset < lastBase {
			before = h.NextOffset()
			continue
		}
		tail = append(tail, b)
		ends = append(ends, len(bytes.Join(tail, nil)))
	}
	full := bytes.Join(tail, nil)
	cases := 1000
	if os.Getenv("RUNNEL_CHAOS") != "" {
		cases = 20000
	}
	for i := 0; i < cases; i++ {
		fs := img.Crash(nil)
		data := full
		keep := len(tail)
		switch i % 3 {
		case 0: // cut
			cut := rng.IntN(len(full) + 1)
			data = full[:cut]
			keep = 0
			for keep < len(ends) && ends[keep] <= cut {
				keep++
			}
		case 1: // garbage after the last batch
			g := make([]byte, 1+rng.IntN(200))
			for j := range g {
				g[j] = byte(rng.Uint32())
			}
			data = append(bytes.Clone(full), g...)
		case 2: // one flipped byte in a CRC-covered part of the tail batch
			start := 0
			if len(ends) > 1 {
				start = ends[len(ends)-2]
			}
			data = bytes.Clone(full)
			data[start+recordbatch.MagicAt+rng.IntN(len(full)-start-recordbatch.MagicAt)] ^= byte(1 + rng.IntN(255))
			keep = len(tail) - 1
		}
		f, _ := fs.Create(lastPath)
		f.WriteAt(data, 0)
		f.Sync()
		f.Close()
		// Opening must not read segments below the recovery point.
		efs := vfs.NewErrorFS(fs, func(op vfs.Op, path string) error {
			if (op == vfs.OpRead || op == vfs.OpOpen) && strings.HasSuffix(path, logSuffix) && path != lastPath {
				return vfs.ErrInjected
			}
			return nil
		})
		l2, err := Open(dir, cfg, Options{FS: efs})
		if err != nil {
			t.Fatalf("case %d: open: %v", i, err)
		}
		efs.SetInjector(nil)
		wantEnd := lastBase
		if keep > 0 {
			wantEnd = recordbatch.ParseHeader(tail[keep-1]).NextOffset()
		}
		if got := l2.EndOffset(); got != wantEnd {
			t.Fatalf("case %d: end %d, want %d", i, got, wantEnd)
		}
		if keep > 0 {
			got := readAll(t, l2, lastBase, 1<<20)
			if want := bytes.Join(tail[:keep], nil); !bytes.Equal(got, want) {
				t.Fatalf("case %d: last segment holds %d bytes, want %d", i, len(got), len(want))
			}
		}
		checkEpochsMatchBatches(t, l2, fmt.Sprint("case ", i))
		if i%50 == 0 {
			checkIndexes(t, l2)
			if got := readAll(t, l2, 0, 1<<20); len(decodeBatches(t, got)) == 0 || before == 0 {
				t.Fatalf("case %d: early segments unreadable", i)
			}
		}
		info := mustAppend(t, l2, valueBatch(1, 10, 5), 1)
		if info.BaseOffset != wantEnd {
			t.Fatalf("case %d: append after recovery at %d, want %d", i, info.BaseOffset, wantEnd)
		}
		l2.Close()
	}
}

// TestCleanOpenReadsNoSegment checks that after a clean Close, Open reads no
// segment at all and the log still works.
func TestCleanOpenReadsNoSegment(t *testing.T) {
	const dir = "/data/p1"
	cfg := DefaultConfig()
	cfg.SegmentBytes = 2048
	mem := vfs.NewMemFS()
	l := mustOpen(t, dir, cfg, Options{FS: mem})
	for i := 0; i < 40; i++ {
		mustAppend(t, l, valueBatch(2, 60, int64(i)), 0)
	}
	end := l.EndOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	efs := vfs.NewErrorFS(mem, func(op vfs.Op, path string) error {
		if (op == vfs.OpRead || op == vfs.OpOpen) && strings.HasSuffix(path, logSuffix) {
			return vfs.ErrInjected
		}
		return nil
	})
	l = mustOpen(t, dir, cfg, Options{FS: efs})
	if l.EndOffset() != end {
		t.Fatalf("end %d, want %d", l.EndOffset(), end)
	}
	efs.SetInjector(nil)
	mustAppend(t, l, valueBatch(1, 10, 1), 0)
	checkIndexes(t, l)
	l.Close()
}

// A log recovered at its open after an unclean stop writes no checkpoint
// of its recovery point at the next Maintain while what a crash would
// make its next open rescan is within Config.RescanBytes: the checkpoint
// bounds that rescan and nothing else (here the recovered tail is made
// durable by a Sync first, as a flush policy would). Each of the 100,000 logs a broker
// recovered after a kill -9 wrote its state file (two fsyncs) at the first
// maintenance round, one after the other on the broker's run goroutine
// (issue 19). A tail past RescanBytes is checkpointed as before.
func TestMaintainLeavesASmallRecoveredTail(t *testing.T) {
	for _, tc := range []struct {
		name       string
		rescan     int64
		checkpoint bool
	}{
		{"within RescanBytes", 0, false},
		{"past RescanBytes", 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var syncs, creates atomic.Int64
			efs := vfs.NewErrorFS(vfs.NewMemFS(), nil)
			cfg := DefaultConfig()
			cfg.RescanBytes = tc.rescan
			now := time.Unix(1_700_000_000, 0)
			opts := Options{FS: efs, Now: func() time.Time { return now }}
			l := mustOpen(t, "/r", cfg, opts)
			mustAppend(t, l, valueBatch(2, 10, now.UnixMilli()), 3)
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			mustAppend(t, l, valueBatch(2, 10, now.UnixMilli()), 3)
			abandon(l) // unclean: the second batch is past the saved recovery point
			l = mustOpen(t, "/r", cfg, opts)
			defer l.Close()
			if l.EndOffset() != 4 {
				t.Fatalf("recovered end %d, want 4", l.EndOffset())
			}
			// The recovered tail is durable once fsynced (until then no
			// checkpoint may record it: TestRecoveredBytesAreFsyncedBeforeTheyArePromised).
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			efs.SetInjector(countSyncs(&syncs, &creates))
			now = now.Add(2 * checkpointInterval)
			if err := l.Maintain(now); err != nil {
				t.Fatal(err)
			}
			if wrote := syncs.Load() > 0 || creates.Load() > 0; wrote != tc.checkpoint {
				t.Fatalf("Maintain did %d fsyncs and created %d files, want a checkpoint %v", syncs.Load(), creates.Load(), tc.checkpoint)
			}
		})
	}
}

// An open reads the leader-epoch-checkpoint file of a previous release
// only when the directory's listing has one: a log whose state file holds
// no epochs (never written, or written before its first fsync, as most
// logs a broker recovers after a kill -9) made one failed open(2) of it
// per open, one of the dozen calls of each of 100,000 opens after a
// restart (issue 19).
func TestOpenLooksForLegacyEpochsOnlyWhenListed(t *testing.T) {
	efs := vfs.NewErrorFS(vfs.NewMemFS(), nil)
	cfg := DefaultConfig()
	l := mustOpen(t, "/r", cfg, Options{FS: efs})
	mustAppend(t, l, valueBatch(2, 10, time.Now().UnixMilli()), 3)
	abandon(l)
	var looked atomic.Int64
	efs.SetInjector(func(op vfs.Op, path string) error {
		if op == vfs.OpOpen && filepath.Base(path) == epochsFile {
			looked.Add(1)
		}
		return nil
	})
	l = mustOpen(t, "/r", cfg, Options{FS: efs})
	defer l.Close()
	if n := looked.Load(); n != 0 {
		t.Fatalf("the open looked for %s %d times, not listed", epochsFile, n)
	}
	if got := l.LeaderEpoch(); got != 3 {
		t.Fatalf("leader epoch %d after the recovery, want 3", got)
	}
}

// An unclean open looks for the .txnindex of the segment its transaction
// replay starts from only when the directory's listing has one: most logs
// never saw a transaction, and each of the 100,000 logs a broker opens
// after a kill -9 made one failed open(2) of it (issue 19).
func TestUncleanOpenLooksForTxnIndexOnlyWhenListed(t *testing.T) {
	efs := vfs.NewErrorFS(vfs.NewMemFS(), nil)
	cfg := DefaultConfig()
	l := mustOpen(t, "/r", cfg, Options{FS: efs})
	mustAppend(t, l, valueBatch(2, 10, time.Now().UnixMilli()), 3)
	abandon(l)
	var txnOpens atomic.Int64
	efs.SetInjector(func(op vfs.Op, path string) error {
		if op == vfs.OpOpen && strings.HasSuffix(path, txnIndexSuffix) {
			txnOpens.Add(1)
		}
		return nil
	})
	l = mustOpen(t, "/r", cfg, Options{FS: efs})
	if n := txnOpens.Load(); n != 0 {
		t.Fatalf("the unclean open opened a .txnindex %d times, none listed", n)
	}
	if l.EndOffset() != 2 {
		t.Fatalf("recovered end %d, want 2", l.EndOffset())
	}
	// One listed (written by a clean close, then left unclean) is read.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, "/r", cfg, Options{FS: efs})
	mustAppend(t, l, valueBatch(2, 10, time.Now().UnixMilli()), 3)
	abandon(l)
	txnOpens.Store(0)
	l = mustOpen(t, "/r", cfg, Options{FS: efs})
	defer l.Close()
	if n := txnOpens.Load(); n != 1 {
		t.Fatalf("the unclean open opened the listed .txnindex %d times, want 1", n)
	}
}
