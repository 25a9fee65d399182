package quorum

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"
	"github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/segment"
	"go.etcd.io/bbolt"
)

// A raft-wal tail segment can be left sealed on disk while the metadata
// still lists it as the open tail (issue 19). The append that seals a
// segment writes its entries, the segment's index frame and a commit frame
// in one write past the segment's preallocated size; on a full disk that
// write fails after the index frame. Reopened, raft-wal recovers the tail
// up to its last commit frame but takes the index frame after it as a
// seal, and refuses every append ("segment is sealed") while never
// rotating, even once space is back: the node, fail-stop on a failed write,
// exits at every start. (A crash between a committed seal and the rotation
// that follows it leaves the same state.) The entries up to the last commit
// frame read back whole, so the log is rebuilt from them: copied with the
// stable keys into a fresh raft-wal, which replaces it.

// The rebuilt copy is made inside the log's own directory, so that it is
// on the same filesystem even when that directory is a mount point (which
// cannot be renamed): built in rebuiltTmp, synced, then renamed to rebuilt
// (the commit point: the copy is complete and durable), then its files are
// linked over the log's and rebuilt is removed. A crash before the commit
// point leaves the old log whole (the rebuild runs again); after it,
// finishRaftLogRebuild at the next open completes the swap, which it can
// repeat: rebuilt keeps every file until the end.
const (
	rebuiltTmp = "rebuilt.tmp"
	rebuilt    = "rebuilt"
)

// finishRaftLogRebuild completes the swap of a rebuilt copy of the log in
// dir into place, if one is there, and removes an unfinished copy.
func finishRaftLogRebuild(dir string) error {
	if err := os.RemoveAll(filepath.Join(dir, rebuiltTmp)); err != nil {
		return fmt.Errorf("raftfsm: remove an unfinished raft log rebuild: %w", err)
	}
	from := filepath.Join(dir, rebuilt)
	entries, err := os.ReadDir(from)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("raftfsm: finish a raft log rebuild: %w", err)
	}
	keep := map[string]bool{}
	for _, e := range entries {
		keep[e.Name()] = true
		// A link under a new name renamed over the old file: the name
		// holds the old file or the new one, never nothing.
		staged := filepath.Join(dir, e.Name()+".rebuilt")
		if err := os.Remove(staged); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("raftfsm: finish a raft log rebuild: %w", err)
		}
		if err := os.Link(filepath.Join(from, e.Name()), staged); err != nil {
			return fmt.Errorf("raftfsm: finish a raft log rebuild: %w", err)
		}
		if err := os.Rename(staged, filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("raftfsm: finish a raft log rebuild: %w", err)
		}
		// A rename onto a link of the same file (linked by the swap a crash
		// interrupted) does nothing, leaving staged.
		if err := os.Remove(staged); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("raftfsm: finish a raft log rebuild: %w", err)
		}
	}
	// The old log's segments the copy does not replace (raft-wal would
	// keep one whose ID the copy reuses).
	old, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("raftfsm: finish a raft log rebuild: %w", err)
	}
	for _, e := range old {
		if !e.IsDir() && filepath.Ext(e.Name()) == ".wal" && !keep[e.Name()] {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return fmt.Errorf("raftfsm: finish a raft log rebuild: %w", err)
			}
		}
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("raftfsm: finish a raft log rebuild: %w", err)
	}
	if err := os.RemoveAll(from); err != nil {
		return fmt.Errorf("raftfsm: remove a raft log rebuild in place: %w", err)
	}
	return nil
}

// tailSealedOnDisk reports whether the tail segment of the raft-wal in dir,
// open in the metadata, is sealed in its file: the log would refuse every
// append. It only reads (the metadata through the WAL's open meta store,
// the segment file through a second descriptor).
func tailSealedOnDisk(dir string, meta *metadb.BoltMetaDB) (bool, error) {
	st, err := meta.Load(dir)
	if err != nil {
		return false, fmt.Errorf("raftfsm: read raft log metadata: %w", err)
	}
	if len(st.Segments) == 0 {
		return false, nil
	}
	tail := st.Segments[len(st.Segments)-1]
	if !tail.SealTime.IsZero() {
		return false, nil
	}
	sw, err := segment.NewFiler(dir, fs.New()).RecoverTail(tail)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil // raft-wal creates it afresh
	}
	if err != nil {
		return false, fmt.Errorf("raftfsm: read raft log tail segment: %w", err)
	}
	sealed, _, err := sw.Sealed()
	return sealed, errors.Join(err, sw.Close())
}

// rebuildRaftLog replaces the raft-wal in dir, open as w (closed on
// return), with a copy of its entries and stable keys.
func rebuildRaftLog(w *raftLog, dir string, segmentBytes int, log *slog.Logger) (err error) {
	tmp := filepath.Join(dir, rebuiltTmp)
	first, err := w.FirstIndex()
	if err == nil {
		var last uint64
		last, err = w.LastIndex()
		if err == nil {
			log.Warn("raftfsm: the raft log's tail segment is sealed on disk but not in its metadata (an append that failed, e.g. on a full disk): rebuilding the log from its committed entries",
				"dir", dir, "first", first, "last", last)
			err = copyRaftLog(w, first, last, tmp, segmentBytes, log)
		}
	}
	if cerr := w.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("raftfsm: close the raft log being rebuilt: %w", cerr)
	}
	if err == nil {
		err = copyStableKeysTo(dir, tmp, segmentBytes, log)
	}
	if err != nil {
		// Free what the copy took (a full disk is the likely cause).
		return errors.Join(err, os.RemoveAll(tmp))
	}
	if err := renameSynced(tmp, filepath.Join(dir, rebuilt)); err != nil {
		return fmt.Errorf("raftfsm: commit the rebuilt raft log: %w", err)
	}
	return finishRaftLogRebuild(dir)
}

// copyRaftLog copies the entries first..last of src into a new raft-wal in
// to, synced when it returns.
func copyRaftLog(src *raftLog, first, last uint64, to string, segmentBytes int, log *slog.Logger) (err error) {
	if err := os.RemoveAll(to); err != nil {
		return fmt.Errorf("raftfsm: remove an unfinished raft log copy: %w", err)
	}
	dst, err := openWAL(to, segmentBytes, log)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, dst.Close()) }()
	if last == 0 {
		return nil
	}
	return copyEntries(first, last, src.GetLog, dst)
}

// copyEntries appends the entries lo..hi read by get to dst, in batches.
func copyEntries(lo, hi uint64, get func(uint64, *raft.Log) error, dst *raftLog) error {
	const batch = 256
	for i := lo; i <= hi; i += batch {
		logs := make([]*raft.Log, 0, batch)
		for j := i; j <= min(hi, i+batch-1); j++ {
			l := new(raft.Log)
			if err := get(j, l); err != nil {
				return fmt.Errorf("raftfsm: copy raft log entry %d: %w", j, err)
			}
			logs = append(logs, l)
		}
		if err := dst.StoreLogs(logs); err != nil {
			return fmt.Errorf("raftfsm: copy raft log entries %d-%d: %w", i, logs[len(logs)-1].Index, err)
		}
	}
	return nil
}

// copyStableKeysTo copies the stable keys of the raft-wal in dir into the
// one in to, synced when it returns.
func copyStableKeysTo(dir, to string, segmentBytes int, log *slog.Logger) error {
	dst, err := openWAL(to, segmentBytes, log)
	if err != nil {
		return err
	}
	err = copyStableKeys(dir, dst)
	if cerr := dst.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("raftfsm: close the rebuilt raft log: %w", cerr)
	}
	return err
}

// copyStableKeys copies every stable key of the raft-wal in dir (closed)
// to dst, as stored: raft-wal has no call listing them, so its bbolt file
// is read directly, read-only.
func copyStableKeys(dir string, dst *raftLog) error {
	db, err := bbolt.Open(filepath.Join(dir, metadb.FileName), 0o600, &bbolt.Options{ReadOnly: true, Timeout: 10 * time.Second})
	if err != nil {
		return fmt.Errorf("raftfsm: open the raft log's stable keys: %w", err)
	}
	err = db.View(func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte(metadb.StableBucket))
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error { return dst.Set(k, v) })
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("raftfsm: copy the raft log's stable keys: %w", err)
	}
	return nil
}
