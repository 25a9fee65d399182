package segments

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/runnel/runnel/recordbatch"
)

// cleanedSuffix names a segment being rewritten by compaction; Open removes
// leftovers, since the rename over the segment is the commit point.
const cleanedSuffix = ".cleaned"

// compaction is one pass's snapshot of what it may touch, taken under
// Log.mu; the pass then reads and writes files without the lock.
type compaction struct {
	segs     []*segment // the sealed segments
	sizes    []int64    // their sizes at the snapshot
	gen      uint64     // Log.segsGen at the snapshot
	interval int32
	active   int64 // base of the first segment not cleaned
	// aborted are the aborted transactions by producer id: their records
	// are dropped and never hide a committed record of the same key.
	aborted map[int64][]AbortedTxn
}

// compact keeps, in the sealed segments, only the latest record of each key
// (as of the sealed segments; the active one is never cleaned) and drops
// tombstones whose timestamp is older than delete.retention.ms. Records
// without a key and control batches (transaction markers) are kept; records
// of aborted transactions are dropped and never count as a key's latest;
// segments holding records of a transaction still open (at or past the
// first unstable offset) are not cleaned yet. It runs when a segment was
// sealed since the last pass or a kept tombstone has come due. Segments are
// read and rewritten without holding Log.mu; the rewritten ones are swapped
// in under it, unless the sealed segments changed meanwhile (truncation,
// retention, reset), in which case the pass is dropped. Called only by
// Maintain, which serializes passes.
func (l *Log) compact(nowMs int64) error {
	l.mu.Lock()
	c, ok, err := l.startCompactionLocked(nowMs)
	l.mu.Unlock()
	if err != nil || !ok {
		return err
	}
	cl := cleaner{latest: make(map[string]int64), aborted: c.aborted, horizon: nowMs - l.cfgSnapshot().DeleteRetentionMs, retention: l.cfgSnapshot().DeleteRetentionMs}
	for i, s := range c.segs {
		if err := l.collectKeys(s, c.sizes[i], &cl); err != nil {
			return l.compactionFailed(c.gen, fmt.Errorf("segments: compaction: %w", err))
		}
	}
	var done []cleaned
	defer func() {
		for _, d := range done {
			removeIfExists(l.fs, d.tmp) // the ones not swapped in
		}
	}()
	for i, s := range c.segs {
		d, changed, err := l.cleanSegment(s, c.sizes[i], c.interval, &cl)
		if err != nil {
			return l.compactionFailed(c.gen, fmt.Errorf("segments: compaction of %d: %w", s.base, err))
		}
		if changed {
			done = append(done, d)
		}
	}
	if l.compactHook != nil {
		l.compactHook()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.err != nil || c.gen != l.segsGen {
		l.logger().Debug("segments: compaction pass dropped: segments changed under it")
		return nil // the next pass redoes it
	}
	for len(done) > 0 {
		if err := l.swapSegmentLocked(done[0].seg, &done[0].ns, done[0].tmp); err != nil {
			return l.failLocked(fmt.Errorf("segments: compaction of %d: %w", done[0].seg.base, err))
		}
		done = done[1:]
	}
	l.cleanedTo, l.tombstoneDue = c.active, cl.due
	return nil
}

// startCompactionLocked decides whether a pass is due and snapshots it.
func (l *Log) startCompactionLocked(nowMs int64) (compaction, bool, error) {
	if err := l.usableLocked(); err != nil {
		return compaction{}, false, err
	}
	if err := l.txnReadyLocked(); err != nil {
		return compaction{}, false, err
	}
	fuo := firstUnstable(l.ongoing, l.end)
	n := len(l.segs) - 1
	for n > 0 && l.segs[n].base > fuo {
		n-- // segments[n-1] may hold records of an open transaction
	}
	if len(l.unsealed) > 0 {
		// A roll's flush writes the index files of the segments it sealed
		// without mu: leave those to the next pass.
		n = min(n, l.segmentForLocked(l.unsealed[0].s.base))
	}
	sealed := l.segs[:n]
	activeBase := l.segs[n].base
	if len(sealed) == 0 || (activeBase <= l.cleanedTo && (l.tombstoneDue == 0 || nowMs < l.tombstoneDue)) {
		return compaction{}, false, nil
	}
	if err := l.markDirtyLocked(); err != nil {
		return compaction{}, false, err
	}
	if l.savedRP < activeBase {
		// After an unclean open or a truncation the state file's recovery
		// point can lie in the segments to clean: recovery takes the epochs
		// past it from their batches, which must be as appended (epochs.go).
		// Rare: a roll's flush saves it at the new segment.
		if l.recoveryPoint < activeBase {
			return compaction{}, false, nil // not durable yet: a later pass
		}
		if err := l.saveStateLocked(false); err != nil {
			return compaction{}, false, err
		}
	}
	c := compaction{gen: l.segsGen, interval: l.cfg.IndexIntervalBytes, active: activeBase, aborted: map[int64][]AbortedTxn{}}
	for i := range l.segs {
		if err := l.txnLoadLocked(i); err != nil {
			return compaction{}, false, err
		}
		for _, a := range l.segs[i].txns.aborted {
			c.aborted[a.ProducerID] = append(c.aborted[a.ProducerID], a)
		}
	}
	for _, s := range sealed {
		c.segs = append(c.segs, s)
		c.sizes = append(c.sizes, s.size)
	}
	return c, true, nil
}

func (l *Log) cfgSnapshot() Config {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cfg
}

// compactionFailed makes err sticky, unless the segments changed under the
// pass (a file it read was cut or removed): then the pass is just dropped.
func (l *Log) compactionFailed(gen uint64, err error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if gen != l.segsGen || l.closed {
		return nil
	}
	return l.failLocked(err)
}

// collectKeys records the offset of the latest record of each key in s.
func (l *Log) collectKeys(s *segment, size int64, c *cleaner) error {
	latest := c.latest
	return l.walkSegment(s, size, func(_ int64, h recordbatch.Header, b []byte) error {
		if h.IsControl() || c.abortedBatch(h, b) {
			return nil
		}
		err := recordbatch.ForEachRecord(h, b, func(r recordbatch.RawRecord) bool {
			if r.Key != nil {
				latest[string(r.Key)] = r.Offset
			}
			return true
		})
		if err != nil {
			// Its keys may be partly collected: filter keeps the batch
			// whole, and a later record of a key it holds may still win.
			l.logger().Warn("segments: compaction keeps an undecodable batch", "offset", h.BaseOffset, "err", err)
		}
		return nil
	})
}

// walkSegment calls fn for each batch of the first size bytes of s with its
// bytes (valid only during the call). It needs no lock: sealed segment
// files only change by being replaced.
func (l *Log) walkSegment(s *segment, size int64, fn func(pos int64, h recordbatch.Header, b []byte) error) error {
	cf, err := l.files.acquire(l.fs, s.path(l.dir))
	if err != nil {
		return err
	}
	defer l.files.release(cf)
	br := segmentReader(cf.f, size)
	var buf []byte
	for pos := int64(0); pos < size; {
		buf = append(buf[:0], make([]byte, recordbatch.PrefixLen)...)
		if _, err := io.ReadFull(br, buf); err != nil {
			return err
		}
		n, err := recordbatch.SizeFromPrefix(buf)
		if err != nil || pos+n > size {
			return fmt.Errorf("%w: at %d in segment %d", recordbatch.ErrCorruptBatch, pos, s.base)
		}
		buf = append(buf, make([]byte, n-recordbatch.PrefixLen)...)
		if _, err := io.ReadFull(br, buf[recordbatch.PrefixLen:]); err != nil {
			return err
		}
		if err := fn(pos, recordbatch.ParseHeader(buf), buf); err != nil {
			return err
		}
		pos += n
	}
	return nil
}

// cleaner holds one compaction pass's decisions.
type cleaner struct {
	latest    map[string]int64
	aborted   map[int64][]AbortedTxn
	horizon   int64 // tombstones with a timestamp below it are dropped
	retention int64
	due       int64 // earliest time a kept tombstone may go, 0 = none
}

// cleaned is a rewritten segment waiting to be swapped in.
type cleaned struct {
	seg *segment
	ns  segment
	tmp string
}

// cleanSegment writes s without the records c drops to a ".cleaned" file;
// changed is false (and no file is left) when nothing would be dropped.
func (l *Log) cleanSegment(s *segment, size int64, interval int32, c *cleaner) (cleaned, bool, error) {
	tmp := s.path(l.dir) + cleanedSuffix
	out, err := l.fs.Create(tmp)
	if err != nil {
		return cleaned{}, false, err
	}
	ns := segment{base: s.base, next: s.base, maxTs: -1, rollTs: -1, loaded: true}
	changed := false
	err = l.walkSegment(s, size, func(_ int64, h recordbatch.Header, b []byte) error {
		nb, err := c.filter(h, b)
		if err != nil {
			l.logger().Warn("segments: compaction keeps an undecodable batch", "offset", h.BaseOffset, "err", err)
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
		nh := recordbatch.ParseHeader(nb)
		ns.idx.add(ns.base, nh, ns.size, ns.maxTs, interval)
		ns.maxTs, ns.next = max(ns.maxTs, nh.MaxTimestamp), nh.NextOffset()
		ns.size += nh.Size
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
		return cleaned{}, false, err
	}
	return cleaned{seg: s, ns: ns, tmp: tmp}, true, nil
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
	l.segsGen++
	return l.sealLocked(s)
}

// filter returns the batch b without the records compaction drops: b
// itself when all stay, nil when none does.
func (c *cleaner) filter(h recordbatch.Header, b []byte) ([]byte, error) {
	if h.IsControl() {
		return b, nil
	}
	if c.abortedBatch(h, b) {
		return nil, nil
	}
	var kept []byte
	n, maxTs := int32(0), int64(-1)
	err := recordbatch.ForEachRecord(h, b, func(r recordbatch.RawRecord) bool {
		if r.Key != nil {
			if c.latest[string(r.Key)] != r.Offset {
				return true
			}
			if r.Value == nil {
				if r.Timestamp < c.horizon {
					return true
				}
				if due := r.Timestamp + c.retention; c.due == 0 || due < c.due {
					c.due = due
				}
			}
		}
		kept = append(kept, r.Raw...)
		n++
		maxTs = max(maxTs, r.Timestamp)
		return true
	})
	switch {
	case err != nil:
		// A batch stored undecodable (before records were validated, or
		// damaged) is kept as it is: readers name it, compaction must
		// not fail the log over it.
		return b, nil
	case n == h.NumRecords:
		return b, nil
	case n == 0:
		return nil, nil
	}
	return recordbatch.Rebuild(h, b, kept, n, maxTs)
}

// abortedBatch reports whether b belongs to an aborted transaction.
func (c *cleaner) abortedBatch(h recordbatch.Header, b []byte) bool {
	if h.Attributes&recordbatch.AttrTransactional == 0 {
		return false
	}
	pid := int64(binary.BigEndian.Uint64(b[recordbatch.ProducerIDAt:]))
	for _, a := range c.aborted[pid] {
		if a.FirstOffset <= h.BaseOffset && h.BaseOffset <= a.LastOffset {
			return true
		}
	}
	return false
}
