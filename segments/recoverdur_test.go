package segments

import (
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runnel/runnel/segments/statefile"
	"github.com/runnel/runnel/segments/vfs"
)

// killedWithUnflushedRoll leaves in mem what a kill -9 leaves of a log
// whose last roll had not been flushed: a state file whose recovery point
// is in an older segment, a sealed segment and an active one past it whose
// bytes (and the active one's directory entry) are in the page cache only.
// It returns the log's end offset.
func killedWithUnflushedRoll(t *testing.T, dir string, mem *vfs.MemFS, cfg Config) int64 {
	t.Helper()
	ts := time.Now().UnixMilli() // no segment.ms roll in the tests' Maintain
	l := mustOpen(t, dir, cfg, Options{FS: mem})
	for range 3 {
		mustAppend(t, l, valueBatch(2, 100, ts), 1)
	}
	if err := l.Close(); err != nil { // durable, state file at the end
		t.Fatal(err)
	}
	l = mustOpen(t, dir, cfg, Options{FS: mem})
	// No roll's flush runs: the sealLoop waits for syncMu until the log
	// is abandoned, then finds it closed.
	l.syncMu.Lock()
	for l.Segments() < 3 {
		mustAppend(t, l, valueBatch(2, 100, ts), 2)
	}
	mustAppend(t, l, valueBatch(2, 100, ts), 2)
	end := l.EndOffset()
	abandon(l)
	l.syncMu.Unlock()
	l.sealers.Wait()
	return end
}

// savedRecoveryPoint reads the recovery point of dir's state file in fs.
func savedRecoveryPoint(t *testing.T, fs vfs.FS, dir string) int64 {
	t.Helper()
	b, err := readFile(fs, filepath.Join(dir, stateFile))
	if err != nil || b == nil {
		t.Fatalf("state file: %v (%d bytes)", err, len(b))
	}
	st, err := statefile.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if st.Clean {
		return st.End
	}
	return st.RecoveryPoint
}

// After a kill -9 the recovered bytes past the saved recovery point may be
// in the page cache only. What the reopened log then promises durable (an
// fsync an append or Sync waits for, a clean Close, a checkpoint of its
// recovery point) must hold after a power cut: the recovered segments are
// fsynced first, an fsync of the active one alone does not cover a sealed
// one, and no state file records a recovery point over unsynced bytes.
func TestRecoveredBytesAreFsyncedBeforeTheyArePromised(t *testing.T) {
	for _, tc := range []struct {
		name    string
		promise func(t *testing.T, l *Log, now time.Time) int64 // the offset promised durable
	}{
		{"Sync", func(t *testing.T, l *Log, _ time.Time) int64 {
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			return l.EndOffset()
		}},
		{"append with flush.messages=1", func(t *testing.T, l *Log, _ time.Time) int64 {
			cfg := l.Config()
			cfg.FlushMessages = 1
			if err := l.SetConfig(cfg); err != nil {
				t.Fatal(err)
			}
			return mustAppend(t, l, valueBatch(1, 10, time.Now().UnixMilli()), 3).LastOffset + 1
		}},
		{"Close", func(t *testing.T, l *Log, _ time.Time) int64 {
			end := l.EndOffset()
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			return end
		}},
		{"Maintain's checkpoint", func(t *testing.T, l *Log, now time.Time) int64 {
			if err := l.Maintain(now.Add(2 * checkpointInterval)); err != nil {
				t.Fatal(err)
			}
			return -1 // whatever the state file says
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const dir = "/d/recovered"
			mem := vfs.NewMemFS()
			cfg := DefaultConfig()
			cfg.SegmentBytes = 1024
			cfg.RescanBytes = -1 // Maintain checkpoints whatever the tail
			end := killedWithUnflushedRoll(t, dir, mem, cfg)
			now := time.Now()
			l := mustOpen(t, dir, cfg, Options{FS: mem, Now: func() time.Time { return now }})
			if got := l.EndOffset(); got != end {
				t.Fatalf("recovered end %d, want %d", got, end)
			}
			promised := tc.promise(t, l, now)
			crashed := mem.Crash(nil)
			if promised < 0 {
				promised = savedRecoveryPoint(t, crashed, dir)
			}
			l2 := mustOpen(t, dir, cfg, Options{FS: crashed})
			defer l2.Close()
			if got := l2.EndOffset(); got < promised {
				t.Fatalf("after a power cut the log ends at %d; %d was promised durable (recovered end %d)", got, promised, end)
			}
			t.Logf("promised %d, end after the power cut %d", promised, l2.EndOffset())
			// Every offset promised is there, without a gap (nothing here
			// is compacted).
			for off := l2.StartOffset(); off < promised; {
				bs := decodeBatches(t, readAll(t, l2, off, 1<<20))
				if bs[0].FirstOffset != off {
					t.Fatalf("after a power cut offset %d is missing (next batch at %d); %d was promised durable", off, bs[0].FirstOffset, promised)
				}
				last := bs[len(bs)-1]
				off = last.FirstOffset + int64(last.LastOffsetDelta) + 1
			}
			checkIndexes(t, l2)
			if tc.name != "Close" {
				l.Close()
			}
		})
	}
}

// An unclean open does no fsync and writes no file for a recovered tail,
// in the active segment or a sealed one: the fsync that must cover those
// bytes is the first one promised afterwards (Sync here), so the 100,000
// logs a broker opens lazily after a kill -9 pay none until then.
func TestUncleanOpenDefersTheRecoveredFsync(t *testing.T) {
	for _, sealed := range []bool{false, true} {
		t.Run(fmt.Sprint("sealed segment past the recovery point ", sealed), func(t *testing.T) {
			const dir = "/d/lazy"
			mem := vfs.NewMemFS()
			efs := vfs.NewErrorFS(mem, nil)
			cfg := DefaultConfig()
			cfg.SegmentBytes = 1024
			var end int64
			if sealed {
				end = killedWithUnflushedRoll(t, dir, mem, cfg)
			} else {
				l := mustOpen(t, dir, cfg, Options{FS: mem})
				mustAppend(t, l, valueBatch(2, 100, time.Now().UnixMilli()), 1)
				if err := l.Sync(); err != nil {
					t.Fatal(err)
				}
				end = mustAppend(t, l, valueBatch(2, 100, time.Now().UnixMilli()), 1).LastOffset + 1
				abandon(l)
			}
			var syncs, creates atomic.Int64
			efs.SetInjector(countSyncs(&syncs, &creates))
			l := mustOpen(t, dir, cfg, Options{FS: efs})
			defer l.Close()
			if l.EndOffset() != end {
				t.Fatalf("recovered end %d, want %d", l.EndOffset(), end)
			}
			// The sealed case's recovered .txnindex files are written (and
			// fsynced) by the transaction rebuild, as before: count the
			// segments' fsyncs only.
			opened := syncs.Load()
			if !sealed && (opened != 0 || creates.Load() != 0) {
				t.Fatalf("the unclean open did %d fsyncs and created %d files, want none", opened, creates.Load())
			}
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			if syncs.Load() == opened {
				t.Fatal("Sync after the unclean open did no fsync")
			}
			if rp := l.RecoveryPoint(); rp != end {
				t.Fatalf("recovery point %d after Sync, end %d", rp, end)
			}
		})
	}
}
