package quorum

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"

	"github.com/runnel/runnel/raftfsm"
)

// The raft log and stable store are hashicorp/raft-wal: append-only
// segment files, one write and one fsync per StoreLogs (raft hands it all
// the entries proposed while the previous append was on disk), and a small
// bbolt file for the stable keys and the segment list. Before it they were
// in badger (logstore.go), whose synced commit costs two msyncs, of its
// value log and of its memtable's WAL: every metadata write waited for
// both (issue 19). openRaftLog moves an older node's badger log over once.

// defaultRaftLogSegmentBytes is the size of one segment file
// (Config.RaftLogSegmentBytes 0), allocated when it is created (the disk it
// takes, used or not). A segment takes the entries of an append even past
// that size, then the next append starts a new one; raft keeps trailingLogs
// entries after a snapshot, so a node holds a few.
const defaultRaftLogSegmentBytes = 4 << 20

// openRaftLog opens dir/raftlog, first moving the raft log and stable keys
// of dir/raft (badger, written by versions before raft-wal) into it when
// only that exists. The move is built in dirRaftLogTmp and renamed into
// place, then dir/raft is removed: a crash at any point leaves either the
// old store alone (the move starts again) or the new one (a leftover old
// store is removed). dir/raft is then a file saying where the log went: an
// older runnel started on this directory fails to open its badger there
// instead of starting with an empty raft log beside the state (it would
// bootstrap anew or skip every entry up to the state's applied index).
func openRaftLog(dir string, segmentBytes int, log *slog.Logger) (*raftLog, error) {
	final := filepath.Join(dir, dirRaftLog)
	old := filepath.Join(dir, dirRaft)
	tmp := filepath.Join(dir, dirRaftLogTmp)
	if err := os.RemoveAll(tmp); err != nil {
		return nil, fmt.Errorf("raftfsm: remove an unfinished raft log move: %w", err)
	}
	oldInfo, err := os.Stat(old)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("raftfsm: raft log: %w", err)
	}
	oldIsMarker := err == nil && !oldInfo.IsDir()
	switch _, err := os.Stat(final); {
	case err == nil:
	case !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("raftfsm: raft log: %w", err)
	case oldIsMarker:
		return nil, fmt.Errorf("raftfsm: the raft log %s is missing (%s says it was there); restore it, or recover this node from a peer", final, old)
	case oldInfo != nil:
		if err := moveBadgerLog(old, tmp, segmentBytes, log); err != nil {
			return nil, err
		}
		if err := renameSynced(tmp, final); err != nil {
			return nil, fmt.Errorf("raftfsm: move raft log into place: %w", err)
		}
	}
	if !oldIsMarker {
		if err := writeMovedMarker(old); err != nil {
			return nil, err
		}
	}
	if err := finishRaftLogRebuild(final); err != nil {
		return nil, err
	}
	w, err := openWAL(final, segmentBytes, log)
	if err != nil {
		return nil, err
	}
	switch sealed, err := tailSealedOnDisk(final, w.meta); {
	case err != nil:
		return nil, errors.Join(err, w.Close())
	case !sealed:
		return w, nil
	}
	if err := rebuildRaftLog(w, final, segmentBytes, log); err != nil {
		return nil, err
	}
	return openWAL(final, segmentBytes, log)
}

// movedMarker is the content of dir/raft once the log is in dir/raftlog.
const movedMarker = "The raft log of this node is in raftlog/ (hashicorp/raft-wal).\n" +
	"A runnel release that kept it here, in badger, cannot use this directory.\n"

// writeMovedMarker replaces path (the badger store moved, or nothing) with
// the marker file, synced with its directory.
func writeMovedMarker(path string) error {
	if err := os.RemoveAll(path); err != nil {
		return fmt.Errorf("raftfsm: remove the moved badger raft log: %w", err)
	}
	tmp := path + ".marker.tmp"
	if err := os.WriteFile(tmp, []byte(movedMarker), 0o600); err != nil {
		return fmt.Errorf("raftfsm: raft log marker: %w", err)
	}
	f, err := os.Open(tmp)
	if err == nil {
		err = errors.Join(f.Sync(), f.Close())
	}
	if err == nil {
		err = renameSynced(tmp, path)
	}
	if err != nil {
		return fmt.Errorf("raftfsm: raft log marker: %w", err)
	}
	return nil
}

// raftLog is raft-wal's WAL keeping raft's LogStore contract for deleted
// entries: after DeleteRange of a prefix, raft-wal still reads the deleted
// entries that share the tail segment with live ones (it moves the first
// index and deletes only whole segments). The leader would then send a
// lagging follower those entries instead of the snapshot that replaced
// them; GetLog answers raft.ErrLogNotFound outside FirstIndex..LastIndex.
//
// It also makes a failed write fatal (failstop.go): hashicorp/raft goes on
// after a failed append (a leader steps down, a follower refuses the
// entries), and raft-wal, once a segment could not be rotated (out of file
// descriptors, disk full), refuses every later append: the node would run
// on with its metadata frozen.
type raftLog struct {
	*wal.WAL
	meta   *metadb.BoltMetaDB // the WAL's, closed by its Close
	writes writeFailure
}

// GetLog reads the entry at index, raft.ErrLogNotFound when it is not in
// the log.
func (l *raftLog) GetLog(index uint64, out *raft.Log) error {
	first, err := l.FirstIndex()
	if err != nil {
		return err
	}
	last, err := l.LastIndex()
	if err != nil {
		return err
	}
	if index < first || index > last {
		return raft.ErrLogNotFound
	}
	return l.WAL.GetLog(index, out)
}

// openWAL opens the raft-wal in dir with segments of segmentBytes (0: the
// default).
func openWAL(dir string, segmentBytes int, log *slog.Logger) (*raftLog, error) {
	if segmentBytes <= 0 {
		segmentBytes = defaultRaftLogSegmentBytes
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("raftfsm: raft log: %w", err)
	}
	// Our own meta store, to close it when Open fails (wal.Open leaves it
	// open then, with the lock on its bbolt file); WAL.Close closes it.
	meta := &metadb.BoltMetaDB{}
	w, err := wal.Open(dir, wal.WithMetaStore(meta), wal.WithSegmentSize(segmentBytes), wal.WithLogger(walLogger(log)))
	if err != nil {
		return nil, errors.Join(fmt.Errorf("raftfsm: open raft log %s: %w", dir, err), meta.Close())
	}
	return &raftLog{WAL: w, meta: meta, writes: newWriteFailure(log)}, nil
}

func walLogger(log *slog.Logger) hclog.Logger { return hclogFor(log).Named("wal") }

// moveBadgerLog copies the stable keys and the log of the badger store in
// from into a new raft-wal in to, synced when it returns. Only the
// contiguous entries ending at the last index are copied: a store that is
// not monotonic may keep entries below a gap left by an installed snapshot,
// which raft never reads again (they are older than the snapshot).
func moveBadgerLog(from, to string, segmentBytes int, log *slog.Logger) (err error) {
	db, err := raftfsm.OpenBadger(from, true, log)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, db.Close()) }()
	src := &logStore{db: db}
	w, err := openWAL(to, segmentBytes, log)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, w.Close()) }()
	if err := src.eachStable(func(k, v []byte) error { return moveStable(w, k, v) }); err != nil {
		return fmt.Errorf("raftfsm: move raft stable keys: %w", err)
	}
	lo, hi, err := src.contiguousTail()
	if err != nil || hi == 0 {
		return err
	}
	log.Info("raftfsm: moving the raft log from badger to raft-wal", "first", lo, "last", hi)
	return copyEntries(lo, hi, src.GetLog, w)
}

// raftUint64Keys are the stable keys raft writes with SetUint64. The badger
// store kept such values big-endian, raft-wal keeps them little-endian: they
// are decoded and written again, not copied.
var raftUint64Keys = map[string]bool{"CurrentTerm": true, "LastVoteTerm": true}

func moveStable(w *raftLog, k, v []byte) error {
	if raftUint64Keys[string(k)] {
		if len(v) != 8 {
			return fmt.Errorf("raftfsm: stable %q: %d bytes, want 8", k, len(v))
		}
		return w.SetUint64(k, binary.BigEndian.Uint64(v))
	}
	return w.Set(k, v)
}

// renameSynced renames a file or directory and syncs its parent, so the new name
// survives a machine crash.
func renameSynced(from, to string) error {
	if err := os.Rename(from, to); err != nil {
		return err
	}
	return syncDir(filepath.Dir(to))
}

// syncDir syncs a directory, so the names created, renamed or removed in it
// survive a machine crash.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}
