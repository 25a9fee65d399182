// Appends: Append and AppendReplicated, batches validated outside the
// log's lock, then offsets assigned and the bytes written under it.

package segments

import (
	"fmt"

	"github.com/runnel/runnel/recordbatch"
)

// Append validates one or more concatenated RecordBatch v2 and appends them
// atomically, assigning base offsets and the partition leader epoch in place
// (batches is modified). A rejected call leaves the log unchanged; errors
// wrap ErrCorruptBatch, ErrBatchTooLarge, ErrClosed or the sticky I/O error.
func (l *Log) Append(batches []byte, leaderEpoch int32) (AppendInfo, error) {
	hs, err := l.splitForAppend(batches, recordbatch.CountExact)
	if err != nil {
		return AppendInfo{}, err
	}
	next := l.end
	for i := range hs {
		hs[i].BaseOffset = next
		hs[i].Epoch = leaderEpoch
		next = hs[i].NextOffset()
	}
	info, syncTo, err := l.appendLocked(batches, hs, func() {
		pos := 0
		for _, h := range hs {
			recordbatch.SetBaseOffset(batches[pos:], h.BaseOffset)
			recordbatch.SetEpoch(batches[pos:], leaderEpoch)
			pos += int(h.Size)
		}
	})
	l.mu.Unlock()
	return l.ackAfterSync(info, syncTo, err)
}

// splitForAppend validates batches outside the lock and returns their
// headers with l.mu held, the log still usable; on error mu is not held.
func (l *Log) splitForAppend(batches []byte, rule recordbatch.CountRule) ([]recordbatch.Header, error) {
	l.mu.Lock()
	limit := int64(l.cfg.MaxMessageBytes)
	rules := recordbatch.Rules{ExactOffsets: true, NeedKeys: l.cfg.compact(), MaxInflated: l.cfg.MaxInflatedBytes,
		FramingOnly: l.cfg.FramingOnly}
	l.mu.Unlock()
	hs, err := recordbatch.Split(batches, limit, rule)
	if err == nil && rule == recordbatch.CountExact {
		err = recordbatch.ValidateAll(batches, hs, rules)
	}
	if err != nil {
		return nil, fmt.Errorf("segments: append: %w", err)
	}
	l.mu.Lock()
	if err := l.usableLocked(); err != nil {
		l.mu.Unlock()
		return nil, err
	}
	return hs, nil
}

// ackAfterSync waits, when the flush policy asks for it, until the log is
// fsynced up to syncTo before acknowledging an append.
func (l *Log) ackAfterSync(info AppendInfo, syncTo int64, err error) (AppendInfo, error) {
	if err != nil {
		return AppendInfo{}, err
	}
	if syncTo > 0 {
		if err := l.syncTo(syncTo); err != nil {
			return AppendInfo{}, err
		}
	}
	return info, nil
}

// AppendReplicated appends batches that already carry their offsets and
// leader epochs, as a follower copies them from the leader. Batches may have
// been compacted (fewer records than offsets). The first base offset must be
// >= EndOffset and offsets must increase. Neither field is rewritten.
func (l *Log) AppendReplicated(batches []byte) (AppendInfo, error) {
	hs, err := l.splitForAppend(batches, recordbatch.CountCompacted)
	if err != nil {
		return AppendInfo{}, err
	}
	next := l.end
	for i, h := range hs {
		if h.BaseOffset < next {
			l.mu.Unlock()
			return AppendInfo{}, fmt.Errorf("segments: append: %w: batch %d has base offset %d below %d", recordbatch.ErrCorruptBatch, i, h.BaseOffset, next)
		}
		next = h.NextOffset()
	}
	info, syncTo, err := l.appendLocked(batches, hs, nil)
	l.mu.Unlock()
	return l.ackAfterSync(info, syncTo, err)
}

// appendLocked writes validated batches whose headers (with the offsets they
// will have) are hs; assign, when set, rewrites offsets in buf after the log
// has rolled if needed. syncTo > 0 asks the caller to wait for an fsync up
// to that offset (after releasing mu) before acknowledging.
func (l *Log) appendLocked(buf []byte, hs []recordbatch.Header, assign func()) (info AppendInfo, syncTo int64, err error) {
	first, last := hs[0].BaseOffset, hs[len(hs)-1].LastOffset()
	if err := l.txnReadyLocked(); err != nil {
		return info, 0, l.failLocked(err)
	}
	s := l.active()
	if err := l.loadLocked(s); err != nil {
		return info, 0, l.failLocked(err)
	}
	if l.shouldRollLocked(s, int64(len(buf)), last, l.nowMs()) {
		if err := l.rollLocked(first); err != nil {
			return info, 0, err
		}
		s = l.active()
	}
	if err := l.markDirtyLocked(); err != nil {
		return info, 0, err
	}
	if assign != nil {
		assign()
	}
	if err := l.writeLocked(s, buf); err != nil {
		return info, 0, err
	}
	info = AppendInfo{BaseOffset: first, LastOffset: last, MaxTimestamp: -1, LogStartOffset: l.start}
	var records int64
	pos := s.size
	for _, h := range hs {
		s.idx.add(s.base, h, pos, s.maxTs, l.cfg.IndexIntervalBytes)
		if s.rollTs < 0 {
			// segment.ms runs from the wall-clock time of the first append,
			// so batches with old timestamps do not roll every append.
			s.rollTs = l.nowMs()
		}
		s.maxTs = max(s.maxTs, h.MaxTimestamp)
		info.MaxTimestamp = max(info.MaxTimestamp, h.MaxTimestamp)
		records += int64(h.NumRecords)
		pos += h.Size
		l.assignEpochLocked(h.Epoch, h.BaseOffset)
	}
	l.keepTailLocked(s, s.size, buf, hs)
	s.size = pos
	s.next = last + 1
	l.end = last + 1
	l.txnAppendedLocked(buf, hs)
	if l.unflushed == 0 {
		l.oldestUnsync = l.now()
	}
	l.unflushed += records
	if l.unflushed >= l.cfg.FlushMessages {
		return info, l.end, nil
	}
	return info, 0, nil
}

// writeLocked writes buf at the end of s. On failure it cuts the file back
// so no partial batch is left, and the error becomes sticky.
func (l *Log) writeLocked(s *segment, buf []byte) error {
	path := l.segPathLocked(s)
	cf, err := l.files.acquire(l.fs, path)
	if err != nil {
		return l.failLocked(fmt.Errorf("segments: open %s: %w", path, err))
	}
	defer l.files.release(cf)
	s.indexOnDisk = false
	if _, err := cf.f.WriteAt(buf, s.size); err != nil {
		if terr := cf.f.Truncate(s.size); terr != nil {
			l.logger().Error("segments: cannot cut back a failed write; recovery will", "err", terr)
		}
		return l.failLocked(fmt.Errorf("segments: write %s: %w", path, err))
	}
	return nil
}
