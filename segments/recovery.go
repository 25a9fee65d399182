package segments

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/runnel/runnel/segments/statefile"
	"github.com/runnel/runnel/segments/vfs"
)

// openLocked reads the directory and the checkpoints and, unless the last
// shutdown was clean, recovers the segments from the recovery point on.
func (l *Log) openLocked() error {
	if err := l.fs.MkdirAll(l.dir); err != nil {
		return err
	}
	names, err := l.fs.List(l.dir)
	if err != nil {
		return err
	}
	// The open's reads of .txnindex files go by the listing (see
	// readTxnIndexLocked); written ones are marked as they are.
	l.opening = true
	defer func() { l.opening = false }()
	for _, name := range names {
		if base, ok := parseSegmentName(name); ok {
			l.segs = append(l.segs, &segment{base: base, maxTs: -1, rollTs: -1})
			continue
		}
		if digits, ok := strings.CutSuffix(name, txnIndexSuffix); ok && len(l.segs) > 0 && digits+logSuffix == segmentName(l.segs[len(l.segs)-1].base, logSuffix) {
			// Sorted: a segment's name comes right before its .txnindex.
			l.segs[len(l.segs)-1].txnListed = true
			continue
		}
		if strings.HasSuffix(name, tmpSuffix) || strings.HasSuffix(name, cleanedSuffix) {
			// A checkpoint or compaction that did not finish.
			if err := l.fs.Remove(filepath.Join(l.dir, name)); err != nil {
				return err
			}
		}
	}
	if err := l.removeOrphanIndexesLocked(names); err != nil {
		return err
	}
	st, err := l.readStateLocked()
	if err != nil {
		return err
	}
	// The file of a previous release goes with the next state file
	// (writeState); beside a state file of version 2 or later it is
	// ignored. It is read only when listed: most logs without epochs in
	// their state file have none (one open less each, issue 19).
	legacy := slices.Contains(names, epochsFile)
	if st.HasEpochs {
		l.epochs = st.Epochs
	} else if legacy {
		if l.epochs, err = l.readEpochsLocked(); err != nil {
			return err
		}
	}
	l.legacyEpochs.Store(legacy)
	if st.Restarting {
		// A Reset, or a Truncate below the log start, cut short: what is
		// left of the old log goes, as it would have.
		l.logger().Warn("segments: finishing a restart of the log cut short", "start", st.StartOffset, "segments", len(l.segs))
		return l.restartAtLocked(st.StartOffset)
	}
	for _, s := range l.segs {
		fi, err := l.fs.Stat(s.path(l.dir))
		if err != nil {
			return err
		}
		s.size = fi.Size()
	}
	if len(l.segs) == 0 {
		l.epochs = nil // no batch, no epoch
		return l.createFirstLocked(st.StartOffset)
	}
	if len(l.segs) == 1 && l.segs[0].base == 0 && l.segs[0].size == 0 && st.Empty() && len(l.epochs) == 0 {
		// Never written: a log created at 0 without fsyncs, closed empty.
		// Open it as createFirstLocked left it, so that it writes no
		// state, index or checkpoint file (4 KB each) until its first
		// write, however often it is opened and closed.
		l.startEmptyLocked(0)
		return nil
	}
	l.start = max(st.StartOffset, l.segs[0].base)
	a := l.active()
	if st.Clean && st.ActiveBase == a.base && st.ActiveSize == a.size && st.End >= a.base {
		l.end = st.End
		l.recoveryPoint = st.End
		l.savedRP = st.End
		l.cleanOnDisk = true
	} else {
		l.recoveryPoint = st.RecoveryPoint
		if err := l.recoverLocked(); err != nil {
			return err
		}
		if err := l.rebuildTxnsFromLocked(l.segmentForLocked(l.savedRP)); err != nil {
			return err
		}
	}
	if l.start > l.end {
		// Records below the start offset were lost (unsynced when the
		// start moved, or cut by a Truncate whose restart did not begin):
		// start over at the start offset, as Kafka does, so it never
		// moves back.
		l.logger().Warn("segments: log ends below its start offset; restarting it empty", "start", l.start, "end", l.end)
		return l.restartAtLocked(l.start)
	}
	l.trimEpochsLocked()
	return nil
}

func (l *Log) readStateLocked() (logState, error) {
	b, err := readFile(l.fs, filepath.Join(l.dir, stateFile))
	if err != nil || b == nil {
		return logState{}, err
	}
	st, err := statefile.Decode(b)
	if err != nil {
		// Corrupt (a checksum that does not match) or not ours: nothing
		// in it is trusted, the log is recovered as one without it.
		l.logger().Warn("segments: ignoring a bad state file; recovering every segment", "file", filepath.Join(l.dir, stateFile), "err", err)
		return logState{}, nil
	}
	return st, nil
}

func (l *Log) readEpochsLocked() ([]epochEntry, error) {
	b, err := readFile(l.fs, filepath.Join(l.dir, epochsFile))
	if err != nil || b == nil {
		return nil, err
	}
	es, err := statefile.DecodeLegacyEpochs(b)
	if err != nil {
		l.logger().Warn("segments: ignoring a bad leader-epoch checkpoint", "err", err)
		return nil, nil
	}
	return es, nil
}

// createFirstLocked starts an empty log at base. A brand-new log (base 0)
// is created without fsyncs: losing an empty log to a crash loses nothing,
// the next Open creates it again, and skipping the four fsyncs is what lets
// a broker create many thousands of partitions quickly. Its first append,
// roll or close makes it durable like any other.
func (l *Log) createFirstLocked(base int64) error {
	s := &segment{base: base, loaded: true, next: base, maxTs: -1, rollTs: -1}
	cf, err := l.files.create(l.fs, s.path(l.dir))
	if err != nil {
		return err
	}
	l.files.release(cf)
	l.startEmptyLocked(base)
	if base == 0 {
		return nil
	}
	l.dirUnsynced = false
	if err := l.fs.SyncDir(l.dir); err != nil {
		return err
	}
	return l.saveStateLocked(false)
}

// startEmptyLocked makes the log one empty segment at base, its file on
// disk already; at base 0 it is marked as created without fsyncs
// (syncNewDirLocked makes it durable at its first write).
func (l *Log) startEmptyLocked(base int64) {
	l.segs = []*segment{{base: base, loaded: true, next: base, maxTs: -1, rollTs: -1}}
	l.start, l.end, l.recoveryPoint = base, base, base
	l.txnResetLocked()
	l.dirUnsynced = base == 0
}

// recoverLocked scans the segments from the one holding the recovery point
// to the end, cuts a torn or corrupt tail (dropping any later segment) and
// rebuilds their indexes and the leader epochs of the batches at or past
// the recovery point (see epochs.go). Segments before it are not read.
func (l *Log) recoverLocked() error {
	i := l.segmentForLocked(l.recoveryPoint)
	l.keepEpochsBeforeLocked(l.recoveryPoint)
	minNext := int64(0)
	for ; i < len(l.segs); i++ {
		s := l.segs[i]
		if s.base < minNext {
			// A segment starting inside its predecessor: not ours to keep.
			return l.dropFromLocked(i)
		}
		stopped, err := l.recoverSegmentLocked(s, minNext)
		if err != nil {
			return err
		}
		minNext = s.next
		if stopped && i < len(l.segs)-1 {
			if err := l.dropFromLocked(i + 1); err != nil {
				return err
			}
			break
		}
	}
	l.end = l.active().next
	l.savedRP = l.recoveryPoint
	l.queueRecoveredLocked()
	return nil
}

// queueRecoveredLocked leaves the recovery point where the state file had
// it and makes the recovered bytes past it something to flush. They were
// written by a process that stopped without fsyncing them (a kill -9
// leaves them in the page cache, a power cut may not have): trusting them
// as fsynced let an fsync of the active segment alone acknowledge an
// append, Sync or Close over unsynced bytes of a sealed segment, and a
// checkpoint record a recovery point over bytes never fsynced, which the
// open after a power cut then did not scan
// (TestRecoveredBytesAreFsyncedBeforeTheyArePromised). Each sealed segment
// holding such bytes is queued as a roll's flush is (fsync, index files,
// directory, state file); the active segment's count as unflushed
// appends. Nothing is fsynced here: at scale (100,000 logs recovered
// lazily after a kill -9) the open stays free of fsyncs, and the first
// fsync the log's flush policy, a Sync, Close or the next roll asks for
// covers them, as it must anyway. A crash before then scans them again
// from the same recovery point.
func (l *Log) queueRecoveredLocked() {
	l.recoveryPoint = min(l.savedRP, l.end)
	l.unsealed = l.unsealed[:0]
	for i := l.segmentForLocked(l.recoveryPoint); i < len(l.segs)-1; i++ {
		s := l.segs[i]
		if s.next <= l.recoveryPoint {
			continue // every batch of it is below the recovery point
		}
		l.unsealed = append(l.unsealed, &pendingSeal{s: s, upTo: l.segs[i+1].base, files: l.indexFilesLocked(s)})
	}
	if l.end > l.recoveryPoint {
		l.unflushed = l.end - l.recoveryPoint // offsets: an upper bound on the records
		l.oldestUnsync = l.now()
	}
}

// recoverSegmentLocked scans s, truncates it to its valid prefix and
// installs the rebuilt index; stopped reports a cut.
func (l *Log) recoverSegmentLocked(s *segment, minNext int64) (stopped bool, err error) {
	cf, err := l.files.acquire(l.fs, s.path(l.dir))
	if err != nil {
		return false, err
	}
	defer l.files.release(cf)
	r, err := scanSegment(cf.f, s.size, s.base, minNext, l.recoveryPoint, l.cfg.IndexIntervalBytes)
	if err != nil {
		return false, fmt.Errorf("scan %s: %w", s.path(l.dir), err)
	}
	if r.stop != nil {
		l.logger().Warn("segments: truncating a torn or corrupt tail", "segment", s.base, "at", r.valid, "size", s.size, "reason", r.stop)
		if err := cf.f.Truncate(r.valid); err != nil {
			return false, err
		}
		if err := cf.f.Sync(); err != nil {
			return false, err
		}
	}
	s.size, s.idx, s.next, s.maxTs, s.rollTs = r.valid, r.idx, r.next, r.maxTs, r.rollTs
	s.loaded, s.indexOnDisk = true, false
	for _, e := range r.epochs {
		l.assignEpochLocked(e.Epoch, e.Start)
	}
	return r.stop != nil, nil
}

// dropFromLocked deletes segments i.. (newest first, so a crash leaves a
// prefix) and syncs the directory.
func (l *Log) dropFromLocked(i int) error {
	for j := len(l.segs) - 1; j >= i; j-- {
		if err := l.removeSegmentFilesLocked(l.segs[j]); err != nil {
			return err
		}
	}
	l.segs = l.segs[:i]
	l.segsGen++
	if len(l.segs) == 0 {
		return errors.New("segments: no segment left")
	}
	return l.fs.SyncDir(l.dir)
}

// removeSegmentFilesLocked removes the files of s, the segment last, so a
// crash never leaves index files without their segment (the directory is
// not synced).
func (l *Log) removeSegmentFilesLocked(s *segment) error {
	l.files.forget(l.fs, s.path(l.dir))
	if err := l.removeIndexFilesLocked(s); err != nil {
		return err
	}
	if err := removeIfExists(l.fs, filepath.Join(l.dir, segmentName(s.base, txnIndexSuffix))); err != nil {
		return err
	}
	return removeIfExists(l.fs, s.path(l.dir))
}

func (l *Log) removeIndexFilesLocked(s *segment) error {
	for _, suffix := range []string{indexSuffix, timeIndexSuffix} {
		if err := removeIfExists(l.fs, filepath.Join(l.dir, segmentName(s.base, suffix))); err != nil {
			return err
		}
	}
	return nil
}

func removeIfExists(fs vfs.FS, path string) error {
	if err := fs.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// upgradeRebuilds counts the segments whose index files, written by a
// previous release without a checksum, this process rebuilt.
var upgradeRebuilds atomic.Int64

// loadLocked makes the indexes, next offset and max timestamp of s known:
// from the index files when they agree with the segment, else by a scan.
func (l *Log) loadLocked(s *segment) error {
	if s.loaded {
		return nil
	}
	cf, err := l.files.acquire(l.fs, s.path(l.dir))
	if err != nil {
		return fmt.Errorf("segments: open %s: %w", s.path(l.dir), err)
	}
	defer l.files.release(cf)
	if err := l.loadIndexLocked(s, cf.f); err == nil {
		s.loaded, s.indexOnDisk = true, true
		return nil
	} else if errors.Is(err, errNoIndexChecksum) {
		// Expected once per sealed segment after an upgrade, on its first
		// read: said once per process at Info, each segment at Debug (a
		// line per segment flooded the log of a node with thousands).
		if upgradeRebuilds.Add(1) == 1 {
			l.logger().Info("segments: rebuilding index files of a previous release (without a checksum): each sealed segment's once, on its first read; each segment is logged at Debug", "segment", s.path(l.dir))
		} else {
			l.logger().Debug("segments: rebuilding index files of a previous release", "segment", s.path(l.dir))
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		l.logger().Warn("segments: rebuilding an index that does not match its segment", "segment", s.path(l.dir), "reason", err)
	}
	return l.rebuildIndexLocked(s, cf.f)
}

// rebuildIndexLocked scans s (open as f) and installs the indexes, next
// offset and max timestamp the scan finds, writing the index files of a
// sealed segment.
func (l *Log) rebuildIndexLocked(s *segment, f vfs.File) error {
	r, err := scanSegment(f, s.size, s.base, 0, 0, l.cfg.IndexIntervalBytes)
	if err != nil {
		return fmt.Errorf("segments: scan %s: %w", s.path(l.dir), err)
	}
	if r.stop != nil {
		// Below the recovery point the bytes were fsynced; keep them, index
		// what is readable, and say so.
		l.logger().Error("segments: corrupt batch below the recovery point", "segment", s.base, "at", r.valid, "reason", r.stop)
	}
	s.idx, s.next, s.maxTs, s.rollTs, s.loaded = r.idx, r.next, r.maxTs, r.rollTs, true
	if s != l.active() {
		if err := l.sealLocked(s); err != nil {
			l.logger().Warn("segments: cannot write rebuilt index", "err", err)
		}
	}
	return nil
}

// rebuildBadIndexLocked rebuilds the index of s (open as f) after a read
// found an entry that does not match the segment (cause, wrapping
// errBadIndex: an index file changed on disk, see checkEntry); the read is
// then answered from the rebuilt index.
func (l *Log) rebuildBadIndexLocked(s *segment, f vfs.File, cause error) error {
	l.logger().Warn("segments: rebuilding an index that does not match its segment", "segment", s.path(l.dir), "reason", cause)
	return l.rebuildIndexLocked(s, f)
}

// loadIndexLocked reads the index files of s and checks them against the
// segment: the last indexed batch must sit where the index says, and the
// batches after it must end exactly at the end of the file.
func (l *Log) loadIndexLocked(s *segment, f vfs.File) error {
	offs, err := readFile(l.fs, filepath.Join(l.dir, segmentName(s.base, indexSuffix)))
	if err != nil {
		return err
	}
	times, err := readFile(l.fs, filepath.Join(l.dir, segmentName(s.base, timeIndexSuffix)))
	if err != nil {
		return err
	}
	if offs == nil || times == nil {
		if s.size == 0 {
			s.next, s.maxTs = s.base, -1
			s.idx = segIndex{}
			return nil
		}
		return os.ErrNotExist
	}
	x, err := decodeIndex(offs, times, s.size)
	if err != nil {
		return err
	}
	s.next, s.maxTs = s.base, -1
	if len(x.offsets) > 0 {
		e := x.offsets[len(x.offsets)-1]
		h, err := readHeader(f, int64(e.pos), s.size)
		if err != nil || h.BaseOffset != s.base+int64(e.rel) {
			return fmt.Errorf("%w: last entry does not point at its batch", errBadIndex)
		}
		next, tailMax, lastPos, err := tailScan(f, int64(e.pos), s.size)
		if err != nil {
			return fmt.Errorf("%w: %v", errBadIndex, err)
		}
		if lastPos-int64(e.pos) >= int64(l.cfg.IndexIntervalBytes) {
			// A batch that far past the last entry would have been indexed.
			return fmt.Errorf("%w: batch at %d not indexed", errBadIndex, lastPos)
		}
		first, err := readHeader(f, 0, s.size)
		if err != nil {
			return fmt.Errorf("%w: %v", errBadIndex, err)
		}
		s.next, s.maxTs, s.rollTs = next, tailMax, first.MaxTimestamp
	}
	if n := len(x.times); n > 0 {
		if end := s.rel(s.next); x.times[n-1].rel > end {
			// A lookup would start past the segment's batches.
			return fmt.Errorf("%w: time entry at %d past the end %d", errBadIndex, x.times[n-1].rel, end)
		}
		s.maxTs = max(s.maxTs, x.times[n-1].ts)
		if x.times[n-1].rel == s.rel(s.next) {
			x.times = x.times[:n-1] // the sealing entry; see encodeTimes
		}
	}
	s.idx = x
	return nil
}

// removeOrphanIndexesLocked removes index files whose segment is gone.
func (l *Log) removeOrphanIndexesLocked(names []string) error {
	have := make(map[int64]bool, len(l.segs))
	for _, s := range l.segs {
		have[s.base] = true
	}
	for _, name := range names {
		for _, suffix := range []string{indexSuffix, timeIndexSuffix, txnIndexSuffix} {
			digits, ok := strings.CutSuffix(name, suffix)
			if !ok {
				continue
			}
			if base, ok := parseSegmentName(digits + logSuffix); ok && !have[base] {
				if err := removeIfExists(l.fs, filepath.Join(l.dir, name)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// syncNewDir is syncNewDirLocked without mu held across the directory
// fsync and the state file's write (a slow disk must not stall the log's
// appends and reads for them). The caller holds syncMu and not mu: nobody
// else writes the state file, moves the recovery point or the log start,
// or reopens the log meanwhile (a log marked clean, whose first append
// writes the state file under mu alone, takes the locked way).
func (l *Log) syncNewDir() error {
	l.mu.Lock()
	if err := l.usableLocked(); err != nil || !l.dirUnsynced {
		l.mu.Unlock()
		return err
	}
	if l.cleanOnDisk {
		err := l.syncNewDirLocked()
		l.mu.Unlock()
		return err
	}
	st := l.stateLocked(l.recoveryPoint)
	l.mu.Unlock()
	err := l.fs.SyncDir(l.dir)
	if err != nil {
		err = fmt.Errorf("segments: fsync %s: %w", l.dir, err)
	} else if err = l.writeState(st); err != nil {
		err = fmt.Errorf("segments: write %s: %w", stateFile, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		return l.failLocked(err)
	}
	// savedAt stays, as after a roll's flush (sealDoneLocked).
	l.dirUnsynced = false
	l.savedRP = st.RecoveryPoint
	return nil
}

// syncNewDirLocked makes a log created without fsyncs durable: its
// directory entries and state file, before the first fsync of its data, so
// no fsynced record can be lost with a directory entry that was not.
func (l *Log) syncNewDirLocked() error {
	if !l.dirUnsynced {
		return nil
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.failLocked(fmt.Errorf("segments: fsync %s: %w", l.dir, err))
	}
	l.dirUnsynced = false
	return l.saveStateLocked(false)
}
