package segments

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/runnel/runnel/recordbatch"
)

// indexEntry maps a batch's base offset (relative to the segment base) to the
// batch's byte position in the segment file.
type indexEntry struct {
	rel uint32
	pos uint32
}

// timeEntry says that every batch of the segment with a base offset below
// base+rel has a max timestamp <= ts. Entries grow strictly in ts and rel.
type timeEntry struct {
	ts  int64
	rel uint32
}

const (
	indexEntryLen = 8
	timeEntryLen  = 12
	// indexCRCLen is the trailer of an index file: a CRC-32C (fileCRC) of
	// its entries. A file of a release before it has none: its length is
	// a multiple of the entry size, where a file with it is 4 more.
	indexCRCLen = 4
)

var (
	errBadIndex = errors.New("segments: inconsistent index")
	// errNoIndexChecksum says an index file is a previous release's,
	// without the trailer: rebuilt once, then written with it.
	errNoIndexChecksum = errors.New("no checksum (written by a previous release)")
)

// segIndex is a segment's sparse offset index and time index, in memory.
type segIndex struct {
	offsets []indexEntry
	times   []timeEntry
	// sinceLast counts the bytes appended since the last offset entry.
	sinceLast int64
}

// add records the batch h that was written at pos. maxBefore is the largest
// timestamp of the batches before it in the segment.
func (x *segIndex) add(base int64, h recordbatch.Header, pos int64, maxBefore int64, interval int32) {
	if len(x.offsets) == 0 || x.sinceLast >= int64(interval) {
		rel := uint32(h.BaseOffset - base)
		x.offsets = append(x.offsets, indexEntry{rel: rel, pos: uint32(pos)})
		x.sinceLast = 0
		if maxBefore >= 0 && (len(x.times) == 0 || maxBefore > x.times[len(x.times)-1].ts) {
			x.times = append(x.times, timeEntry{ts: maxBefore, rel: rel})
		}
	}
	x.sinceLast += h.Size
}

// lookup returns the entry of the last indexed batch with base <= rel, or
// the zero entry (position 0).
func (x *segIndex) lookup(rel uint32) indexEntry {
	i := sort.Search(len(x.offsets), func(i int) bool { return x.offsets[i].rel > rel })
	if i == 0 {
		return indexEntry{}
	}
	return x.offsets[i-1]
}

// lookupPos returns the last indexed entry at a position <= pos.
func (x *segIndex) lookupPos(pos int64) indexEntry {
	i := sort.Search(len(x.offsets), func(i int) bool { return int64(x.offsets[i].pos) > pos })
	if i == 0 {
		return indexEntry{}
	}
	return x.offsets[i-1]
}

// lookupTime returns the relative offset from which a scan for the first
// batch with max timestamp >= ts must start.
func (x *segIndex) lookupTime(ts int64) uint32 {
	i := sort.Search(len(x.times), func(i int) bool { return x.times[i].ts >= ts })
	if i == 0 {
		return 0
	}
	return x.times[i-1].rel
}

// truncate drops the entries at or past pos / rel.
func (x *segIndex) truncate(rel uint32, pos int64) {
	i := sort.Search(len(x.offsets), func(i int) bool { return int64(x.offsets[i].pos) >= pos })
	x.offsets = x.offsets[:i]
	j := sort.Search(len(x.times), func(i int) bool { return x.times[i].rel >= rel })
	x.times = x.times[:j]
	x.resume(pos)
}

// resume sets sinceLast for a segment of size bytes, as appending every batch
// would have left it, so the index stays equal to a rebuild.
func (x *segIndex) resume(size int64) {
	x.sinceLast = 0
	if n := len(x.offsets); n > 0 {
		x.sinceLast = size - int64(x.offsets[n-1].pos)
	}
}

// encodeOffsets encodes the offset index file: its entries, then their
// CRC-32C.
func (x *segIndex) encodeOffsets() []byte {
	b := make([]byte, 0, len(x.offsets)*indexEntryLen+indexCRCLen)
	for _, e := range x.offsets {
		b = binary.BigEndian.AppendUint32(b, e.rel)
		b = binary.BigEndian.AppendUint32(b, e.pos)
	}
	return appendFileCRC(b)
}

// indexEntries returns the entries of an index file b of entries of n
// bytes, checking its CRC-32C trailer.
func indexEntries(b []byte, n int) ([]byte, error) {
	switch len(b) % n {
	case indexCRCLen:
	case 0:
		return nil, fmt.Errorf("%w: %w", errBadIndex, errNoIndexChecksum)
	default:
		return nil, fmt.Errorf("%w: odd length %d", errBadIndex, len(b))
	}
	entries, ok := checkFileCRC(b)
	if !ok {
		return nil, fmt.Errorf("%w: checksum mismatch", errBadIndex)
	}
	return entries, nil
}

// encodeTimes encodes the time index of a sealed segment: its entries and a
// final one, (maxTs, end) with end the relative offset after the last batch,
// that records the segment's max timestamp (loading strips that entry
// again), then their CRC-32C.
func (x *segIndex) encodeTimes(end uint32, maxTs int64) []byte {
	b := make([]byte, 0, (len(x.times)+1)*timeEntryLen+indexCRCLen)
	times := x.times
	if maxTs >= 0 && (len(times) == 0 || maxTs > times[len(times)-1].ts) {
		times = append(times[:len(times):len(times)], timeEntry{ts: maxTs, rel: end})
	}
	for _, e := range times {
		b = binary.BigEndian.AppendUint64(b, uint64(e.ts))
		b = binary.BigEndian.AppendUint32(b, e.rel)
	}
	return appendFileCRC(b)
}

// decodeIndex parses index files and checks them: their checksums, then
// against the segment size: strictly increasing, inside the file, first
// entry at position 0.
func decodeIndex(offs, times []byte, size int64) (segIndex, error) {
	var x segIndex
	offs, err := indexEntries(offs, indexEntryLen)
	if err != nil {
		return x, fmt.Errorf("offset index: %w", err)
	}
	if times, err = indexEntries(times, timeEntryLen); err != nil {
		return x, fmt.Errorf("time index: %w", err)
	}
	for i := 0; i < len(offs); i += indexEntryLen {
		e := indexEntry{rel: binary.BigEndian.Uint32(offs[i:]), pos: binary.BigEndian.Uint32(offs[i+4:])}
		if int64(e.pos) >= size || (i == 0 && e.pos != 0) {
			return x, fmt.Errorf("%w: position %d outside %d bytes", errBadIndex, e.pos, size)
		}
		if n := len(x.offsets); n > 0 && (e.rel <= x.offsets[n-1].rel || e.pos <= x.offsets[n-1].pos) {
			return x, fmt.Errorf("%w: offset entries not increasing", errBadIndex)
		}
		x.offsets = append(x.offsets, e)
	}
	if size > 0 && len(x.offsets) == 0 {
		return x, fmt.Errorf("%w: no entries for %d bytes", errBadIndex, size)
	}
	for i := 0; i < len(times); i += timeEntryLen {
		e := timeEntry{ts: int64(binary.BigEndian.Uint64(times[i:])), rel: binary.BigEndian.Uint32(times[i+8:])}
		if n := len(x.times); n > 0 && (e.ts <= x.times[n-1].ts || e.rel < x.times[n-1].rel) {
			return x, fmt.Errorf("%w: time entries not increasing", errBadIndex)
		}
		x.times = append(x.times, e)
	}
	x.resume(size)
	return x, nil
}

// fitsRelative reports whether off can be stored relative to base in a uint32.
func fitsRelative(base, off int64) bool { return off >= base && off-base <= math.MaxUint32 }
