package segments

import "fmt"

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
	for ok && err == nil && pos < s.size {
		var h batchHeader
		if h, err = readHeader(cf.f, pos, s.size); err != nil {
			break
		}
		if h.maxTimestamp >= ts && h.lastOffset() >= l.start {
			off, t, found, err := l.searchBatchLocked(cf.f, pos, h, ts)
			if err != nil || found {
				return off, t, found, err
			}
		}
		pos += h.size
	}
	if err != nil {
		return 0, 0, false, fmt.Errorf("segments: timestamp lookup in %s: %w", s.path(l.dir), err)
	}
	return 0, 0, false, nil
}

// searchBatchLocked finds the record with a timestamp >= ts in the batch h
// at pos, whose max timestamp is known to be >= ts.
func (l *Log) searchBatchLocked(f File, pos int64, h batchHeader, ts int64) (int64, int64, bool, error) {
	buf := make([]byte, h.size)
	if _, err := f.ReadAt(buf, pos); err != nil {
		return 0, 0, false, err
	}
	data, err := batchRecords(h, buf)
	if err != nil {
		// An undecodable batch: answer with its base, as Kafka would with a
		// batch-level index.
		return max(h.baseOffset, l.start), h.maxTimestamp, true, nil
	}
	var off, t int64
	found := false
	err = forEachRecord(h, data, func(r record) bool {
		if r.offset >= l.start && r.timestamp >= ts {
			off, t, found = r.offset, r.timestamp, true
			return false
		}
		return true
	})
	if err != nil {
		return max(h.baseOffset, l.start), h.maxTimestamp, true, nil
	}
	// Not found: the records >= ts are below the log start offset.
	return off, t, found, nil
}
