package segments

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
)

// cleanedSuffix names a segment being rewritten by compaction; Open removes
// leftovers, since the rename over the segment is the commit point.
const cleanedSuffix = ".cleaned"

// compactLocked keeps, in the sealed segments, only the latest record of
// each key (as of the sealed segments; the active one is never cleaned) and
// drops tombstones whose timestamp is older than delete.retention.ms.
// Records without a key and control batches are kept. It runs when a segment
// was sealed since the last pass or a kept tombstone has come due.
func (l *Log) compactLocked(nowMs int64) error {
	sealed := l.segs[:len(l.segs)-1]
	if len(sealed) == 0 {
		return nil
	}
	activeBase := l.active().base
	if activeBase <= l.cleanedTo && (l.tombstoneDue == 0 || nowMs < l.tombstoneDue) {
		return nil
	}
	if err := l.markDirtyLocked(); err != nil {
		return err
	}
	latest := make(map[string]int64)
	for _, s := range sealed {
		err := l.walkSegmentLocked(s, func(_ int64, h batchHeader, b []byte) error {
			if h.isControl() {
				return nil
			}
			data, err := batchRecords(h, b)
			if err != nil {
				l.logger.Warn("segments: compaction keeps an undecodable batch", "offset", h.baseOffset, "err", err)
				return nil
			}
			return forEachRecord(h, data, func(r record) bool {
				if r.key != nil {
					latest[string(r.key)] = r.offset
				}
				return true
			})
		})
		if err != nil {
			return l.failLocked(fmt.Errorf("segments: compaction: %w", err))
		}
	}
	c := cleaner{latest: latest, horizon: nowMs - l.cfg.DeleteRetentionMs, retention: l.cfg.DeleteRetentionMs}
	for _, s := range sealed {
		if err := l.cleanSegmentLocked(s, &c); err != nil {
			return l.failLocked(fmt.Errorf("segments: compaction of %d: %w", s.base, err))
		}
	}
	l.cleanedTo, l.tombstoneDue = activeBase, c.due
	return nil
}

// walkSegmentLocked calls fn for each batch of s with its bytes (valid only
// during the call).
func (l *Log) walkSegmentLocked(s *segment, fn func(pos int64, h batchHeader, b []byte) error) error {
	cf, err := l.files.acquire(l.fs, s.path(l.dir))
	if err != nil {
		return err
	}
	defer l.files.release(cf)
	br := bufio.NewReaderSize(io.NewSectionReader(cf.f, 0, s.size), 256<<10)
	var buf []byte
	for pos := int64(0); pos < s.size; {
		buf = append(buf[:0], make([]byte, batchPrefixLen)...)
		if _, err := io.ReadFull(br, buf); err != nil {
			return err
		}
		n, err := batchSizeFromPrefix(buf)
		if err != nil || pos+n > s.size {
			return fmt.Errorf("%w: at %d in segment %d", ErrCorruptBatch, pos, s.base)
		}
		buf = append(buf, make([]byte, n-batchPrefixLen)...)
		if _, err := io.ReadFull(br, buf[batchPrefixLen:]); err != nil {
			return err
		}
		if err := fn(pos, parseHeader(buf), buf); err != nil {
			return err
		}
		pos += n
	}
	return nil
}

// cleaner holds one compaction pass's decisions.
type cleaner struct {
	latest    map[string]int64
	horizon   int64 // tombstones with a timestamp below it are dropped
	retention int64
	due       int64 // earliest time a kept tombstone may go, 0 = none
}

// cleanSegmentLocked rewrites s without the records c drops, through a
// ".cleaned" file renamed over it. An unchanged segment is left alone.
func (l *Log) cleanSegmentLocked(s *segment, c *cleaner) error {
	if err := l.loadLocked(s); err != nil {
		return err
	}
	tmp := s.path(l.dir) + cleanedSuffix
	out, err := l.fs.Create(tmp)
	if err != nil {
		return err
	}
	ns := segment{base: s.base, next: s.base, maxTs: -1, rollTs: -1, loaded: true}
	changed := false
	err = l.walkSegmentLocked(s, func(_ int64, h batchHeader, b []byte) error {
		nb, err := c.filter(h, b)
		if err != nil {
			l.logger.Warn("segments: compaction keeps an undecodable batch", "offset", h.baseOffset, "err", err)
			nb = b
		}
		if len(nb) != len(b) {
			changed = true
		}
		if nb == nil {
			return nil
		}
		if _, err := out.WriteAt(nb, ns.size); err != nil {
			return err
		}
		nh := parseHeader(nb)
		ns.idx.add(ns.base, nh, ns.size, ns.maxTs, l.cfg.IndexIntervalBytes)
		ns.maxTs, ns.next = max(ns.maxTs, nh.maxTimestamp), nh.nextOffset()
		ns.size += nh.size
		return nil
	})
	if err == nil && changed {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil || !changed {
		if rerr := l.fs.Remove(tmp); err == nil {
			err = rerr
		}
		return err
	}
	return l.swapSegmentLocked(s, &ns, tmp)
}

// swapSegmentLocked installs the rewritten segment ns from tmp in place of s.
func (l *Log) swapSegmentLocked(s, ns *segment, tmp string) error {
	if err := l.removeIndexFilesLocked(s); err != nil {
		return err
	}
	l.files.forget(l.fs, s.path(l.dir))
	if err := l.fs.Rename(tmp, s.path(l.dir)); err != nil {
		return err
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return err
	}
	s.size, s.idx, s.maxTs, s.next, s.loaded = ns.size, ns.idx, ns.maxTs, ns.next, true
	return l.sealLocked(s)
}

// filter returns the batch b without the records compaction drops: b
// itself when all stay, nil when none does.
func (c *cleaner) filter(h batchHeader, b []byte) ([]byte, error) {
	if h.isControl() {
		return b, nil
	}
	data, err := batchRecords(h, b)
	if err != nil {
		return nil, err
	}
	var kept []byte
	n, maxTs := int32(0), int64(-1)
	err = forEachRecord(h, data, func(r record) bool {
		if r.key != nil {
			if c.latest[string(r.key)] != r.offset {
				return true
			}
			if r.value == nil {
				if r.timestamp < c.horizon {
					return true
				}
				if due := r.timestamp + c.retention; c.due == 0 || due < c.due {
					c.due = due
				}
			}
		}
		kept = append(kept, r.raw...)
		n++
		maxTs = max(maxTs, r.timestamp)
		return true
	})
	switch {
	case err != nil:
		return nil, err
	case n == h.numRecords:
		return b, nil
	case n == 0:
		return nil, nil
	}
	return rebuildBatch(h, b, kept, n, maxTs)
}

// rebuildBatch encodes a batch with the header of b (base offset, offset
// range, first timestamp and codec unchanged, so record deltas stay valid)
// holding the n records kept.
func rebuildBatch(h batchHeader, b, kept []byte, n int32, maxTs int64) ([]byte, error) {
	payload, err := compress(h.compression(), kept, h.compression() == codecSnappy && len(b) > batchHeaderLen+8 && string(b[batchHeaderLen:batchHeaderLen+8]) == string(xerialMagic))
	if err != nil {
		return nil, err
	}
	out := make([]byte, batchHeaderLen, batchHeaderLen+len(payload))
	copy(out, b[:batchHeaderLen])
	out = append(out, payload...)
	binary.BigEndian.PutUint32(out[lengthAt:], uint32(len(out)-batchPrefixLen))
	binary.BigEndian.PutUint32(out[numRecordsAt:], uint32(n))
	if h.attributes&0x8 == 0 {
		binary.BigEndian.PutUint64(out[maxTimestampAt:], uint64(maxTs))
	}
	binary.BigEndian.PutUint32(out[crcAt:], crc32.Checksum(out[attrAt:], castagnoli))
	return out, nil
}
