package segments

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/runnel/runnel/recordbatch"
)

const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
)

// segment is one file of the log: the batches with offsets from base up to the
// next segment's base. Guarded by the owning Log's mu.
type segment struct {
	base int64
	size int64 // bytes of whole, valid batches

	// Known once loaded (indexes read or rebuilt); a sealed segment of a log
	// opened cleanly is loaded only when first used.
	loaded bool
	idx    segIndex
	next   int64 // offset after the last batch; base when empty
	maxTs  int64 // largest batch max timestamp, -1 when none
	rollTs int64 // ms the segment.ms clock runs from; -1 until known
	// indexOnDisk says the index files match idx and the segment is sealed.
	indexOnDisk bool
	// txnListed says the directory listed a .txnindex of the segment at
	// Open, or one was written since; consulted during Open only.
	txnListed bool
	txns      segTxns // transactions (txn.go)
}

func segmentName(base int64, suffix string) string {
	var b strings.Builder
	b.Grow(20 + len(suffix))
	writeSegmentName(&b, base, suffix)
	return b.String()
}

// writeSegmentName writes base zero-padded to 20 digits, then suffix.
func writeSegmentName(b *strings.Builder, base int64, suffix string) {
	var digits [20]byte
	n := strconv.AppendInt(digits[:0], base, 10)
	for range 20 - len(n) {
		b.WriteByte('0')
	}
	b.Write(n)
	b.WriteString(suffix)
}

// path is the segment file's path in dir, a Log's directory (cleaned by
// newLog). Every append and read needs it, to find its file in the
// FileCache: filepath.Join and Sprintf took 0.76 us of it, ~15% of an
// append to a log whose file is open (BenchmarkAppendEachPartition).
// They take it from segPathLocked, which makes it once a segment.
func (s *segment) path(dir string) string {
	if dir == "" || dir == "." || os.IsPathSeparator(dir[len(dir)-1]) { // the root
		return filepath.Join(dir, segmentName(s.base, logSuffix))
	}
	var b strings.Builder
	b.Grow(len(dir) + 1 + 20 + len(logSuffix))
	b.WriteString(dir)
	b.WriteByte(filepath.Separator)
	writeSegmentName(&b, s.base, logSuffix)
	return b.String()
}

// segPathLocked is s.path(l.dir), kept for the last segment asked, the
// active one while appends come: each append and read finds its file in
// the FileCache by path, and a burst writing to more logs than the cache
// holds also opens it by that path, so a path made per append was an
// allocation of each (issue 19). One path a log, not one a segment: a
// node holds 300,000 logs.
func (l *Log) segPathLocked(s *segment) string {
	if l.segPath == "" || l.segPathBase != s.base {
		l.segPath, l.segPathBase = s.path(l.dir), s.base
	}
	return l.segPath
}

// parseSegmentName returns the base offset of a "%020d.log" file name.
func parseSegmentName(name string) (int64, bool) {
	digits, ok := strings.CutSuffix(name, logSuffix)
	if !ok || len(digits) != 20 {
		return 0, false
	}
	base, err := strconv.ParseInt(digits, 10, 64)
	return base, err == nil && base >= 0
}

// rel returns off relative to the segment base, clamped to the uint32 range.
func (s *segment) rel(off int64) uint32 {
	switch {
	case off <= s.base:
		return 0
	case off-s.base > 1<<32-1:
		return 1<<32 - 1
	}
	return uint32(off - s.base)
}

// readHeader reads the batch header at pos.
func readHeader(f io.ReaderAt, pos, size int64) (recordbatch.Header, error) {
	var b [recordbatch.HeaderLen]byte
	if pos+recordbatch.HeaderLen > size {
		return recordbatch.Header{}, fmt.Errorf("%w: header at %d past the end %d", recordbatch.ErrCorruptBatch, pos, size)
	}
	if _, err := f.ReadAt(b[:], pos); err != nil {
		return recordbatch.Header{}, err
	}
	h := recordbatch.ParseHeader(b[:])
	if h.Size < recordbatch.HeaderLen || pos+h.Size > size {
		return h, fmt.Errorf("%w: batch at %d of %d bytes past the end %d", recordbatch.ErrCorruptBatch, pos, h.Size, size)
	}
	return h, nil
}

// scanResult is what a full scan of a segment file found.
type scanResult struct {
	idx    segIndex
	valid  int64 // bytes of whole valid batches
	next   int64
	maxTs  int64
	rollTs int64 // first batch's max timestamp, -1 when none
	stop   error // why the scan stopped before the end, nil at a clean end
	// epochs are where the leader epochs of the batches ending at or past
	// the scan's epochsFrom grow: the base offset of the first such batch
	// of each epoch newer than those before it.
	epochs []epochEntry
}

// segmentReader reads the first size bytes of a segment file through a
// buffer of at most 256 KiB, no larger than they are: the opens of many
// small logs after a crash, or left by CloseAll to rescan, each scan and
// replay their segment (768 KiB allocated per log when every pass took a
// 256 KiB buffer).
func segmentReader(f io.ReaderAt, size int64) *bufio.Reader {
	return bufio.NewReaderSize(io.NewSectionReader(f, 0, size), int(min(size, 256<<10)))
}

// scanSegment reads size bytes of a segment file from the start, checking
// every batch (length, magic, CRC, record count, offsets increasing from
// minNext and fitting the segment), and rebuilds its indexes. It stops at
// the first bad or torn batch; I/O errors are returned as err.
func scanSegment(f io.ReaderAt, size, base, minNext, epochsFrom int64, interval int32) (scanResult, error) {
	r := scanResult{next: max(base, minNext), maxTs: -1, rollTs: -1}
	br := segmentReader(f, size)
	var buf []byte
	for r.valid < size {
		if size-r.valid < recordbatch.HeaderLen {
			r.stop = fmt.Errorf("%w: %d trailing bytes", recordbatch.ErrCorruptBatch, size-r.valid)
			break
		}
		buf = append(buf[:0], make([]byte, recordbatch.PrefixLen)...)
		if _, err := io.ReadFull(br, buf); err != nil {
			return r, err
		}
		n, err := recordbatch.SizeFromPrefix(buf)
		if err == nil && n > size-r.valid {
			err = fmt.Errorf("%w: torn batch of %d bytes, %d left", recordbatch.ErrCorruptBatch, n, size-r.valid)
		}
		if err != nil {
			r.stop = err
			break
		}
		buf = append(buf, make([]byte, n-recordbatch.PrefixLen)...)
		if _, err := io.ReadFull(br, buf[recordbatch.PrefixLen:]); err != nil {
			return r, err
		}
		h, err := recordbatch.Check(buf, 0, recordbatch.CountCompacted)
		if err == nil && (h.BaseOffset < r.next || !fitsRelative(base, h.LastOffset())) {
			err = fmt.Errorf("%w: offset %d out of order (next %d, segment %d)", recordbatch.ErrCorruptBatch, h.BaseOffset, r.next, base)
		}
		if err != nil {
			r.stop = err
			break
		}
		r.idx.add(base, h, r.valid, r.maxTs, interval)
		if k := len(r.epochs); h.Epoch >= 0 && h.LastOffset() >= epochsFrom && (k == 0 || h.Epoch > r.epochs[k-1].Epoch) {
			r.epochs = append(r.epochs, epochEntry{Epoch: h.Epoch, Start: h.BaseOffset})
		}
		if r.rollTs < 0 {
			r.rollTs = h.MaxTimestamp
		}
		r.maxTs = max(r.maxTs, h.MaxTimestamp)
		r.next = h.NextOffset()
		r.valid += h.Size
	}
	return r, nil
}

// tailScan walks batch headers (no CRC check) from pos to end and returns the
// next offset, the largest max timestamp seen and where the last batch starts.
func tailScan(f io.ReaderAt, pos, end int64) (next, maxTs, lastPos int64, err error) {
	next, maxTs, lastPos = -1, -1, pos
	for pos < end {
		h, err := readHeader(f, pos, end)
		if err != nil {
			return next, maxTs, lastPos, err
		}
		next, maxTs, lastPos = h.NextOffset(), max(maxTs, h.MaxTimestamp), pos
		pos += h.Size
	}
	return next, maxTs, lastPos, nil
}

// findBatch returns the position and header of the first batch of s whose
// last offset is >= off, scanning from the index; ok is false when the
// segment holds none.
func (s *segment) findBatch(f io.ReaderAt, off int64) (int64, recordbatch.Header, bool, error) {
	e := s.idx.lookup(s.rel(off))
	pos := int64(e.pos)
	for pos < s.size {
		h, err := readHeader(f, pos, s.size)
		if pos == int64(e.pos) {
			err = s.checkEntry(e, h, err)
		}
		if err != nil {
			return 0, h, false, err
		}
		if h.LastOffset() >= off {
			return pos, h, true, nil
		}
		pos += h.Size
	}
	return pos, recordbatch.Header{}, false, nil
}

// checkEntry checks the index entry e against what reading the header at
// its position gave (h, or err). An entry whose file's checksum matches
// but that is wrong for its segment (the segment changed under it) passes
// loadIndexLocked's checks when it stays in order and inside the segment,
// so each entry a read starts or jumps from is checked: one that is not at a batch, or not at its batch, would make
// a read fail, skip records or pass its limit. The result wraps
// errBadIndex then (Read rebuilds the index). The zero entry is lookup's
// answer below the first entry too, where the batch at position 0 may
// start past the segment's base, and a batch that cannot be read there is
// the segment's fault.
func (s *segment) checkEntry(e indexEntry, h recordbatch.Header, err error) error {
	switch {
	case e == (indexEntry{}):
		return err
	case err != nil:
		return fmt.Errorf("%w: entry for offset %d at %d: %w", errBadIndex, s.base+int64(e.rel), e.pos, err)
	case h.BaseOffset != s.base+int64(e.rel):
		return fmt.Errorf("%w: entry for offset %d at %d holds a batch at %d", errBadIndex, s.base+int64(e.rel), e.pos, h.BaseOffset)
	}
	return nil
}

// rangeEnd returns the end of the run of whole batches that starts with the
// batch h at pos, is at most maxBytes long (but holds h) and holds no batch
// whose base offset is >= maxOffset (when maxOffset >= 0).
func (s *segment) rangeEnd(f io.ReaderAt, pos int64, h recordbatch.Header, maxBytes int, maxOffset int64) (int64, error) {
	end := pos + h.Size
	limit := s.size
	if int64(maxBytes) < s.size-pos {
		limit = pos + int64(maxBytes)
	}
	if maxOffset < 0 {
		maxOffset = 1<<63 - 1
	}
	// Batches before an index entry at a position <= limit fit, and those
	// before the entry for maxOffset have smaller base offsets.
	jump := s.idx.lookupPos(limit)
	if e := s.idx.lookup(s.rel(maxOffset)); s.base+int64(e.rel) > maxOffset {
		jump = indexEntry{}
	} else if e.pos < jump.pos {
		jump = e
	}
	jumped := int64(jump.pos) > end
	end = max(end, int64(jump.pos))
	for end < s.size {
		h, err := readHeader(f, end, s.size)
		if jumped {
			err, jumped = s.checkEntry(jump, h, err), false
		}
		if err != nil {
			return 0, err
		}
		if end+h.Size > limit || h.BaseOffset >= maxOffset {
			break
		}
		end += h.Size
	}
	return end, nil
}
