package segments

import (
	"errors"
	"fmt"
	"sort"

	"github.com/runnel/runnel/recordbatch"

	"github.com/runnel/runnel/segments/vfs"
)

// Truncate removes every record at offset >= to, cutting at a batch
// boundary: a batch holding offset to is removed whole, so EndOffset is
// afterwards the end of the last batch kept (== to when to is a batch
// boundary, as the offsets a replica truncates to are). When that would
// leave the end below the log start offset, or to is below it, the log is
// emptied and restarted at to.
func (l *Log) Truncate(to int64) error {
	l.lockQuiet()
	defer l.unlockQuiet()
	if err := l.usableLocked(); err != nil {
		return err
	}
	if to >= l.end {
		return nil
	}
	if to < 0 {
		return fmt.Errorf("%w: truncate to %d", ErrOffsetOutOfRange, to)
	}
	if err := l.markDirtyLocked(); err != nil {
		return err
	}
	if to < l.start || to < l.segs[0].base {
		return l.restartAtLocked(to)
	}
	l.dropTailLocked() // the cut may be in it; appends after it write there again
	i := l.segmentForLocked(to)
	end, err := l.cutEndLocked(l.segs[i], to)
	if err != nil {
		return l.failLocked(fmt.Errorf("segments: truncate: %w", err))
	}
	// The recovery point goes down to the end the cut leaves first, and
	// the state file keeps the epochs below it only, so that a crash
	// mid-way rescans from there and takes the epochs of what is appended
	// after the cut from its batches (epochs.go).
	l.recoveryPoint = min(l.recoveryPoint, end)
	l.keepEpochsBeforeLocked(end)
	if err := l.saveStateLocked(false); err != nil {
		return err
	}
	if i < len(l.segs)-1 {
		if err := l.dropFromLocked(i + 1); err != nil {
			return l.failLocked(fmt.Errorf("segments: truncate: %w", err))
		}
	}
	if err := l.cutSegmentLocked(l.segs[i], to); err != nil {
		return l.failLocked(fmt.Errorf("segments: truncate: %w", err))
	}
	l.end = l.active().next
	l.recoveryPoint = min(l.recoveryPoint, l.end)
	l.unflushed = 0
	l.truncGen++
	if err := l.rebuildTxnsFromLocked(len(l.segs) - 1); err != nil {
		return l.failLocked(fmt.Errorf("segments: truncate: %w", err))
	}
	// The segment cut takes appends again: its sealed .txnindex (aborted
	// entries of markers the cut may have removed) is replaced by a
	// base-only one, durable before any later segment's directory entry,
	// so a power cut before its next seal lands never trusts the old one.
	l.saveTxnIndexLocked(l.active(), nil, -1)
	l.cleanedTo = min(l.cleanedTo, l.active().base)
	if l.start > l.end {
		// The cut removed a batch straddling the start offset: nothing is
		// left at or past it, and the start offset never moves back.
		return l.restartAtLocked(to)
	}
	l.trimEpochsLocked()
	return nil
}

// cutEndLocked returns the end offset s will have once cutSegmentLocked
// cuts it at to: the next offset of the last batch it keeps.
func (l *Log) cutEndLocked(s *segment, to int64) (int64, error) {
	if err := l.loadLocked(s); err != nil {
		return 0, err
	}
	cf, err := l.files.acquire(l.fs, s.path(l.dir))
	if err != nil {
		return 0, err
	}
	defer l.files.release(cf)
	pos, _, ok, err := l.findBatchLocked(s, cf.f, to)
	if err != nil || !ok {
		return s.next, err
	}
	i := sort.Search(len(s.idx.offsets), func(i int) bool { return int64(s.idx.offsets[i].pos) >= pos })
	from := int64(0)
	if i > 0 {
		from = int64(s.idx.offsets[i-1].pos)
	}
	next, _, _, err := tailScan(cf.f, from, pos)
	if err != nil {
		return 0, err
	}
	if next < 0 {
		return s.base, nil // nothing kept
	}
	return next, nil
}

// findBatchLocked is s.findBatch (s open as f) for a cut: when the index
// entry it starts from is not at its batch (an index file changed on disk,
// see checkEntry), the index is rebuilt and the batch found from that, as
// a read does, instead of failing the truncation and with it the log.
func (l *Log) findBatchLocked(s *segment, f vfs.File, off int64) (int64, recordbatch.Header, bool, error) {
	pos, h, ok, err := s.findBatch(f, off)
	if errors.Is(err, errBadIndex) {
		if err = l.rebuildBadIndexLocked(s, f, err); err == nil {
			pos, h, ok, err = s.findBatch(f, off)
		}
	}
	return pos, h, ok, err
}

// cutSegmentLocked removes the batches of s whose last offset is >= to.
func (l *Log) cutSegmentLocked(s *segment, to int64) error {
	if err := l.loadLocked(s); err != nil {
		return err
	}
	cf, err := l.files.acquire(l.fs, s.path(l.dir))
	if err != nil {
		return err
	}
	defer l.files.release(cf)
	pos, h, ok, err := l.findBatchLocked(s, cf.f, to)
	if err != nil {
		return err
	}
	if !ok {
		return nil // nothing at or past to in s
	}
	// s takes appends again: its index files go (the lowered recovery point
	// makes a crash rescan it) and are written anew when it is sealed.
	s.indexOnDisk = false
	l.segsGen++
	if err := l.removeIndexFilesLocked(s); err != nil {
		return err
	}
	if err := cf.f.Truncate(pos); err != nil {
		return err
	}
	if err := cf.f.Sync(); err != nil {
		return err
	}
	s.size = pos
	s.idx.truncate(s.rel(h.BaseOffset), pos)
	// Recompute the next offset and max timestamp of what is left.
	s.next, s.maxTs = s.base, -1
	if n := len(s.idx.times); n > 0 {
		s.maxTs = s.idx.times[n-1].ts
	}
	from := int64(0)
	if n := len(s.idx.offsets); n > 0 {
		from = int64(s.idx.offsets[n-1].pos)
	}
	next, tailMax, _, err := tailScan(cf.f, from, pos)
	if err != nil {
		return err
	}
	if next >= 0 {
		s.next = next
	}
	s.maxTs = max(s.maxTs, tailMax)
	if pos == 0 {
		s.rollTs = -1
	}
	return nil
}

// Reset empties the log and restarts it at offset: a follower whose log is
// entirely behind the leader's log start offset starts over there.
func (l *Log) Reset(offset int64) error {
	l.lockQuiet()
	defer l.unlockQuiet()
	if err := l.usableLocked(); err != nil {
		return err
	}
	if offset < 0 {
		return fmt.Errorf("%w: reset to %d", ErrOffsetOutOfRange, offset)
	}
	if err := l.markDirtyLocked(); err != nil {
		return err
	}
	return l.restartAtLocked(offset)
}

// restartAtLocked deletes every segment and starts an empty log at off.
// The state file says so before the first segment goes (Restarting) and
// stops saying so once the new segment is durable: after a crash in
// between, the old segments left (some under the new start offset) are
// leftovers that Open removes, finishing the restart, rather than a log
// to recover, which would be neither the old log nor the new one.
func (l *Log) restartAtLocked(off int64) error {
	l.dropTailLocked()
	l.recoveryPoint, l.start = off, off
	l.epochs = nil // with the state file: nothing is left to carry one
	st := l.stateLocked(off)
	st.Restarting = true
	if err := l.writeState(st); err != nil {
		return l.failLocked(fmt.Errorf("segments: write %s: %w", stateFile, err))
	}
	l.cleanOnDisk = false
	ns := &segment{base: off, loaded: true, next: off, maxTs: -1, rollTs: -1}
	old := l.segs
	for j := len(old) - 1; j >= 0; j-- {
		if err := l.removeSegmentFilesLocked(old[j]); err != nil {
			return l.failLocked(fmt.Errorf("segments: remove segment: %w", err))
		}
	}
	cf, err := l.files.create(l.fs, ns.path(l.dir))
	if err != nil {
		return l.failLocked(fmt.Errorf("segments: create segment: %w", err))
	}
	l.files.release(cf)
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.failLocked(fmt.Errorf("segments: sync dir: %w", err))
	}
	l.segs = []*segment{ns}
	l.txnResetLocked()
	l.segsGen++
	l.end, l.unflushed, l.cleanedTo = off, 0, 0
	l.truncGen++
	return l.saveStateLocked(false)
}

// DeleteRecordsBefore advances the log start offset to offset and deletes
// the segments wholly below it. offset must be <= EndOffset.
func (l *Log) DeleteRecordsBefore(offset int64) error {
	l.lockQuiet()
	defer l.unlockQuiet()
	if err := l.usableLocked(); err != nil {
		return err
	}
	if offset > l.end {
		return fmt.Errorf("%w: delete records before %d, end offset %d", ErrOffsetOutOfRange, offset, l.end)
	}
	if offset <= l.start {
		l.trimEpochsLocked()
		return nil
	}
	if err := l.markDirtyLocked(); err != nil {
		return err
	}
	l.start = offset
	if err := l.saveStateLocked(false); err != nil {
		return err
	}
	n := 0
	for n+1 < len(l.segs) && l.segs[n+1].base <= offset {
		n++
	}
	if err := l.dropOldestLocked(n); err != nil {
		return err
	}
	l.trimEpochsLocked()
	return nil
}

// dropOldestLocked deletes the n oldest segments (never the active one).
func (l *Log) dropOldestLocked(n int) error {
	if n <= 0 {
		return nil
	}
	n = min(n, len(l.segs)-1)
	// The new oldest segment's transaction state must not need the
	// segments going away: rebuilt (and its file rewritten) now if bad.
	if err := l.txnLoadLocked(n); err != nil {
		l.logger().Warn("segments: transaction state of the new oldest segment unknown", "segment", l.segs[n].base, "err", err)
	} else {
		l.saveTxnIndexLocked(l.segs[n], nil, -1)
	}
	for _, s := range l.segs[:n] {
		if err := l.removeSegmentFilesLocked(s); err != nil {
			return l.failLocked(fmt.Errorf("segments: remove segment: %w", err))
		}
	}
	l.segs = append([]*segment(nil), l.segs[n:]...)
	l.segsGen++
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.failLocked(fmt.Errorf("segments: sync dir: %w", err))
	}
	if l.start < l.segs[0].base {
		l.start = l.segs[0].base
		return l.saveStateLocked(false)
	}
	return nil
}
