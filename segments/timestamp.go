package segments

import (
	"errors"
	"fmt"
	"sort"

	"github.com/runnel/runnel/recordbatch"

	"github.com/runnel/runnel/segments/vfs"
)

// OffsetForTimestamp returns the first offset whose timestamp is >= ts and
// that timestamp; ok is false when there is none. Records below the log start
// offset are not considered.
func (l *Log) OffsetForTimestamp(ts int64) (offset, timestamp int64, ok bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, 0, false, ErrClosed
	}
	for _, s := range l.segs {
		if err := l.loadLocked(s); err != nil {
			return 0, 0, false, err
		}
		if s.maxTs < ts || s.next <= l.start {
			continue
		}
		off, t, found, err := l.searchTimeLocked(s, ts)
		if err != nil || found {
			return off, t, found, err
		}
	}
	return 0, 0, false, nil
}

// searchTimeLocked finds the first record of s at or past the log start
// offset with a timestamp >= ts.
func (l *Log) searchTimeLocked(s *segment, ts int64) (int64, int64, bool, error) {
	cf, err := l.files.acquire(l.fs, s.path(l.dir))
	if err != nil {
		return 0, 0, false, err
	}
	defer l.files.release(cf)
	from := max(s.base+int64(s.idx.lookupTime(ts)), l.start)
	pos, _, ok, err := s.findBatch(cf.f, from)
	if errors.Is(err, errBadIndex) {
		if err = l.rebuildBadIndexLocked(s, cf.f, err); err == nil {
			from = max(s.base+int64(s.idx.lookupTime(ts)), l.start)
			pos, _, ok, err = s.findBatch(cf.f, from)
		}
	}
	for ok && err == nil && pos < s.size {
		var h recordbatch.Header
		if h, err = readHeader(cf.f, pos, s.size); err != nil {
			break
		}
		if h.MaxTimestamp >= ts && h.LastOffset() >= l.start {
			off, t, found, err := l.searchBatchLocked(cf.f, pos, h, ts)
			if err != nil || found {
				return off, t, found, err
			}
		}
		pos += h.Size
	}
	if err != nil {
		return 0, 0, false, fmt.Errorf("segments: timestamp lookup in %s: %w", s.path(l.dir), err)
	}
	return 0, 0, false, nil
}

// searchBatchLocked finds the record with a timestamp >= ts in the batch h
// at pos, whose max timestamp is known to be >= ts.
func (l *Log) searchBatchLocked(f vfs.File, pos int64, h recordbatch.Header, ts int64) (int64, int64, bool, error) {
	buf := make([]byte, h.Size)
	if _, err := f.ReadAt(buf, pos); err != nil {
		return 0, 0, false, err
	}
	var off, t int64
	found := false
	err := recordbatch.ForEachRecord(h, buf, func(r recordbatch.RawRecord) bool {
		if r.Offset >= l.start && r.Timestamp >= ts {
			off, t, found = r.Offset, r.Timestamp, true
			return false
		}
		return true
	})
	if err != nil {
		// An undecodable batch: answer with its base, as Kafka would with a
		// batch-level index.
		return max(h.BaseOffset, l.start), h.MaxTimestamp, true, nil
	}
	// Not found: the records >= ts are below the log start offset.
	return off, t, found, nil
}

// MaxTimestamp returns the offset and timestamp of the record with the
// largest timestamp at or past the log start offset (the first one on a
// tie), for ListOffsets with timestamp -3; ok is false when no record has a
// timestamp. It reads only the segments that can hold it.
func (l *Log) MaxTimestamp() (offset, timestamp int64, ok bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, 0, false, ErrClosed
	}
	for _, s := range l.segs {
		if err := l.loadLocked(s); err != nil {
			return 0, 0, false, err
		}
	}
	order := make([]*segment, 0, len(l.segs))
	for _, s := range l.segs {
		if s.maxTs >= 0 && s.next > l.start {
			order = append(order, s)
		}
	}
	// Largest max timestamp first; on a tie the older segment first.
	sort.SliceStable(order, func(i, j int) bool { return order[i].maxTs > order[j].maxTs })
	bestOff, bestTs := int64(-1), int64(-1)
	for _, s := range order {
		if s.maxTs <= bestTs && (s.maxTs < bestTs || s.base > bestOff) {
			break // nothing better or earlier can be in it or later ones
		}
		off, ts, found, err := l.maxInSegmentLocked(s)
		if err != nil {
			return 0, 0, false, err
		}
		if found && (ts > bestTs || (ts == bestTs && off < bestOff)) {
			bestOff, bestTs = off, ts
		}
	}
	return bestOff, bestTs, bestOff >= 0, nil
}

// maxInSegmentLocked scans the batch headers of s, then decodes the batches
// that may hold its largest timestamp at or past the log start offset. A
// batch straddling the start offset is decoded at once: its header's max
// may belong to a record below the start.
func (l *Log) maxInSegmentLocked(s *segment) (int64, int64, bool, error) {
	cf, err := l.files.acquire(l.fs, s.path(l.dir))
	if err != nil {
		return 0, 0, false, err
	}
	defer l.files.release(cf)
	type cand struct {
		pos int64
		h   recordbatch.Header
	}
	var cands []cand
	bestOff, bestTs := int64(-1), int64(-1) // from decoded batches
	headerBest := int64(-1)                 // largest header max of the others
	for pos := int64(0); pos < s.size; {
		h, err := readHeader(cf.f, pos, s.size)
		if err != nil {
			return 0, 0, false, err
		}
		switch {
		case h.LastOffset() < l.start || h.MaxTimestamp < 0:
		case h.BaseOffset < l.start:
			off, ts, err := l.maxInBatchLocked(cf.f, pos, h)
			if err != nil {
				return 0, 0, false, err
			}
			if ts > bestTs {
				bestOff, bestTs = off, ts
			}
		case h.MaxTimestamp >= headerBest:
			if h.MaxTimestamp > headerBest {
				cands, headerBest = cands[:0], h.MaxTimestamp
			}
			cands = append(cands, cand{pos, h})
		}
		pos += h.Size
	}
	if headerBest > bestTs {
		for _, c := range cands {
			off, ts, err := l.maxInBatchLocked(cf.f, c.pos, c.h)
			if err != nil {
				return 0, 0, false, err
			}
			if ts > bestTs {
				bestOff, bestTs = off, ts
			}
			if bestTs == headerBest {
				break
			}
		}
	}
	return bestOff, bestTs, bestOff >= 0, nil
}

// maxInBatchLocked returns the first record at or past the log start offset
// with the batch's largest timestamp; an undecodable batch answers with its
// header.
func (l *Log) maxInBatchLocked(f vfs.File, pos int64, h recordbatch.Header) (int64, int64, error) {
	buf := make([]byte, h.Size)
	if _, err := f.ReadAt(buf, pos); err != nil {
		return 0, 0, err
	}
	bestOff, bestTs := int64(-1), int64(-1)
	err := recordbatch.ForEachRecord(h, buf, func(r recordbatch.RawRecord) bool {
		if r.Offset >= l.start && r.Timestamp > bestTs {
			bestOff, bestTs = r.Offset, r.Timestamp
		}
		return true
	})
	if err != nil {
		return max(h.BaseOffset, l.start), h.MaxTimestamp, nil
	}
	return bestOff, bestTs, nil
}
