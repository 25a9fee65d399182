package segments

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/runnel/runnel/recordbatch"
)

// Transactions in the log: every transactional data batch opens a
// transaction of its producer (when none is open) at its base offset; a
// control batch (marker) closes it. The log keeps the open transactions at
// its end (the first unstable offset is the smallest first offset among
// them) and, per segment, the transactions aborted by a marker in that
// segment (Kafka's aborted-transactions index), so a read_committed reader
// can be told which producers' records in a range to drop.
//
// Per segment the log remembers the open transactions at its base offset,
// so the state at any offset can be rebuilt by replaying one segment from
// its base: after a crash (from the segment holding the recovery point),
// after Truncate, and when a segment's .txnindex file is missing or bad
// (then from the previous segment's state, recursively).

const txnIndexSuffix = ".txnindex"

// OngoingTxn is a transaction open in the log.
type OngoingTxn struct {
	ProducerID    int64
	ProducerEpoch int16
	FirstOffset   int64
}

// AbortedTxn is one entry of the aborted-transactions index: producer
// ProducerID's records in [FirstOffset, LastOffset] (LastOffset is the
// abort marker's offset) were aborted; LastStableOffset is the log's first
// unstable offset right after the marker.
type AbortedTxn struct {
	ProducerID       int64
	FirstOffset      int64
	LastOffset       int64
	LastStableOffset int64
}

// segTxns is what a segment knows of transactions. Guarded by Log.mu.
type segTxns struct {
	known   bool                 // base and aborted are set
	base    map[int64]OngoingTxn // open at the segment's base offset
	aborted []AbortedTxn         // by marker offset
}

// txnApply updates the open transactions ongoing with the batch b (header
// h) and returns the aborted entry its marker makes, if any.
func txnApply(ongoing map[int64]OngoingTxn, h recordbatch.Header, b []byte) (AbortedTxn, bool) {
	const transactional = recordbatch.AttrTransactional
	pid := int64(binary.BigEndian.Uint64(b[recordbatch.ProducerIDAt:]))
	if pid < 0 || h.Attributes&transactional == 0 {
		return AbortedTxn{}, false
	}
	if !h.IsControl() {
		if _, open := ongoing[pid]; !open {
			ongoing[pid] = OngoingTxn{ProducerID: pid, ProducerEpoch: int16(binary.BigEndian.Uint16(b[recordbatch.ProducerEpochAt:])), FirstOffset: h.BaseOffset}
		}
		return AbortedTxn{}, false
	}
	m, err := recordbatch.ParseControl(b[:h.Size])
	if err != nil || (m.Type != recordbatch.ControlAbort && m.Type != recordbatch.ControlCommit) {
		return AbortedTxn{}, false // Kafka skips unknown control records
	}
	t, open := ongoing[pid]
	if !open {
		return AbortedTxn{}, false
	}
	delete(ongoing, pid)
	if m.Type != recordbatch.ControlAbort {
		return AbortedTxn{}, false
	}
	return AbortedTxn{ProducerID: pid, FirstOffset: t.FirstOffset, LastOffset: h.BaseOffset,
		LastStableOffset: firstUnstable(ongoing, h.NextOffset())}, true
}

// firstUnstable is the smallest first offset of ongoing, or end.
func firstUnstable(ongoing map[int64]OngoingTxn, end int64) int64 {
	for _, t := range ongoing {
		end = min(end, t.FirstOffset)
	}
	return end
}

// txnAppendedLocked applies appended batches (buf, headers hs) to the
// active segment's transaction state.
func (l *Log) txnAppendedLocked(buf []byte, hs []recordbatch.Header) {
	s := l.active()
	pos := 0
	for _, h := range hs {
		b := buf[pos : pos+int(h.Size)]
		pos += int(h.Size)
		if h.Attributes&recordbatch.AttrTransactional == 0 {
			continue
		}
		if a, ok := txnApply(l.ongoing, h, b); ok {
			s.txns.aborted = append(s.txns.aborted, a)
		}
	}
}

// FirstUnstableOffset is the first offset of the oldest transaction still
// open, or the log end offset when none is: a read_committed reader reads
// below it (and below the high watermark).
func (l *Log) FirstUnstableOffset() (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.txnReadyLocked(); err != nil {
		return 0, err
	}
	return firstUnstable(l.ongoing, l.end), nil
}

// OngoingTxns returns the transactions open at the log end, by first offset.
func (l *Log) OngoingTxns() ([]OngoingTxn, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.txnReadyLocked(); err != nil {
		return nil, err
	}
	out := slices.Collect(maps.Values(l.ongoing))
	slices.SortFunc(out, func(a, b OngoingTxn) int { return cmp.Compare(a.FirstOffset, b.FirstOffset) })
	return out, nil
}

// AbortedTxns returns the aborted transactions with records in [from,
// upTo): entries whose LastOffset >= from and FirstOffset < upTo, sorted by
// first offset, as a Fetch at from reading below upTo reports them.
func (l *Log) AbortedTxns(from, upTo int64) ([]AbortedTxn, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.txnReadyLocked(); err != nil {
		return nil, err
	}
	var out []AbortedTxn
	for i := l.segmentForLocked(from); i < len(l.segs); i++ {
		s := l.segs[i]
		if err := l.txnLoadLocked(i); err != nil {
			return nil, err
		}
		complete := false
		for _, a := range s.txns.aborted {
			if a.LastOffset >= from && a.FirstOffset < upTo {
				out = append(out, a)
			}
			// Every transaction aborted later was open at this
			// marker (first offset >= its LSO) or started after it.
			complete = complete || a.LastStableOffset >= upTo
		}
		if complete {
			break
		}
	}
	slices.SortFunc(out, func(a, b AbortedTxn) int { return cmp.Compare(a.FirstOffset, b.FirstOffset) })
	return out, nil
}

// txnLoadLocked makes the transaction state of segment i known: a sealed
// segment's from its .txnindex file; otherwise (the active segment, a
// missing or bad file) by replaying the segment from the open
// transactions at its base, which come from the file or from the previous
// segment's state, rebuilt the same way (empty for the first segment).
// For the active segment it also sets the open transactions at the end.
func (l *Log) txnLoadLocked(i int) error {
	s := l.segs[i]
	if s.txns.known {
		return nil
	}
	active := s == l.active()
	f, err := l.readTxnIndexLocked(s)
	if err == nil && !active && f.endOffset == txnEndSealed {
		s.txns = segTxns{known: true, base: f.base, aborted: f.aborted}
		return nil
	}
	base, err := l.txnBaseLocked(i, f, err)
	if err != nil {
		return err
	}
	end, aborted, err := l.replayTxnsLocked(s, base, -1)
	if err != nil {
		return err
	}
	s.txns = segTxns{known: true, base: base, aborted: aborted}
	if active {
		l.ongoing = end
	} else {
		l.saveTxnIndexLocked(s, nil, -1)
	}
	return nil
}

// txnBaseLocked returns the open transactions at segment i's base, read
// from its .txnindex file as f (ferr nil), else rebuilt from the previous
// segment (empty for the first), without replaying segment i itself.
func (l *Log) txnBaseLocked(i int, f txnIndexFile, ferr error) (map[int64]OngoingTxn, error) {
	if ferr == nil {
		// Whatever the file's kind (sealed, or written while the segment
		// was active and its roll's flush did not land before a power
		// cut), the open transactions at its base hold.
		return f.base, nil
	}
	if !errors.Is(ferr, os.ErrNotExist) {
		l.logger().Info("segments: rebuilding transaction index", "segment", l.segs[i].base, "reason", ferr)
	}
	if i == 0 {
		return map[int64]OngoingTxn{}, nil
	}
	prev := l.segs[i-1]
	if err := l.txnLoadLocked(i - 1); err != nil {
		return nil, err
	}
	base, _, err := l.replayTxnsLocked(prev, prev.txns.base, -1)
	return base, err
}

// txnReadyLocked makes the open transactions at the log end known (after a
// clean Open they are loaded on first use, so Open reads no segment).
func (l *Log) txnReadyLocked() error {
	if l.txnReady {
		return nil
	}
	if err := l.openTxnsLocked(); err != nil {
		return err
	}
	l.txnReady = true
	return nil
}

// replayTxnsLocked replays the batches of s below upTo (< 0: all) from the
// open transactions base (not modified) and returns those open after them
// and the transactions they aborted.
func (l *Log) replayTxnsLocked(s *segment, base map[int64]OngoingTxn, upTo int64) (map[int64]OngoingTxn, []AbortedTxn, error) {
	ongoing := maps.Clone(base)
	if ongoing == nil {
		ongoing = map[int64]OngoingTxn{}
	}
	var aborted []AbortedTxn
	stop := errors.New("stop")
	err := l.walkSegment(s, s.size, func(_ int64, h recordbatch.Header, b []byte) error {
		if upTo >= 0 && h.BaseOffset >= upTo {
			return stop
		}
		if h.Attributes&recordbatch.AttrTransactional == 0 {
			return nil
		}
		if _, err := recordbatch.Check(b, 0, recordbatch.CountCompacted); err != nil {
			return nil // recovery decides what a bad batch means
		}
		if a, ok := txnApply(ongoing, h, b); ok {
			aborted = append(aborted, a)
		}
		return nil
	})
	if err != nil && !errors.Is(err, stop) {
		return nil, nil, fmt.Errorf("segments: replay transactions of segment %d: %w", s.base, err)
	}
	return ongoing, aborted, nil
}

// rebuildTxnsFromLocked recomputes the transaction state of segments i..
// (their files are rewritten as they are sealed) and the open transactions
// at the log end, after recovery or a truncation changed them. Each of
// them is read once: segment i's base state comes from what is known of
// it, its file or the segment before, not from a replay of its own.
func (l *Log) rebuildTxnsFromLocked(i int) error {
	l.txnReady = true
	base := l.segs[i].txns.base
	if !l.segs[i].txns.known {
		f, err := l.readTxnIndexLocked(l.segs[i])
		if base, err = l.txnBaseLocked(i, f, err); err != nil {
			return err
		}
	}
	for j := i; j < len(l.segs); j++ {
		s := l.segs[j]
		if j > i {
			base = l.ongoing
		}
		end, aborted, err := l.replayTxnsLocked(s, base, -1)
		if err != nil {
			return err
		}
		s.txns, l.ongoing = segTxns{known: true, base: base, aborted: aborted}, end
		if s != l.active() {
			l.saveTxnIndexLocked(s, nil, -1)
		}
	}
	return nil
}

// saveTxnIndexLocked writes the .txnindex of s; end, when endOffset >= 0,
// is the open transactions at endOffset (the log end at a clean Close). A
// failure is logged, not fatal: the file is rebuilt from the segment.
func (l *Log) saveTxnIndexLocked(s *segment, end map[int64]OngoingTxn, endOffset int64) {
	f := l.txnIndexFileLocked(s, end, endOffset)
	if err := writeFileAtomic(l.fs, l.dir, f.name, f.data); err != nil {
		l.logger().Warn("segments: cannot write transaction index", "segment", s.base, "err", err)
	}
	s.txnListed = true // or its old file, if any, is
}

// txnIndexFileLocked encodes the .txnindex file of s. The file of the
// active segment without an end state is marked txnEndBaseOnly: its aborted
// entries stop where the segment's appends went on.
func (l *Log) txnIndexFileLocked(s *segment, end map[int64]OngoingTxn, endOffset int64) sideFile {
	if endOffset < 0 && s == l.active() {
		endOffset = txnEndBaseOnly
	}
	data := encodeTxnIndex(txnIndexFile{base: s.txns.base, endOffset: endOffset, end: end, aborted: s.txns.aborted})
	return sideFile{segmentName(s.base, txnIndexSuffix), data}
}

// readTxnIndexLocked reads the .txnindex of s; os.ErrNotExist when there
// is none. During Open it goes by the directory's listing: a segment
// without one listed makes no call (most logs never saw a transaction,
// and an unclean open of each looked for the file, issue 19).
func (l *Log) readTxnIndexLocked(s *segment) (txnIndexFile, error) {
	if l.opening && !s.txnListed {
		return txnIndexFile{}, os.ErrNotExist
	}
	b, err := readFile(l.fs, filepath.Join(l.dir, segmentName(s.base, txnIndexSuffix)))
	if err != nil {
		return txnIndexFile{}, err
	}
	if b == nil {
		return txnIndexFile{}, os.ErrNotExist
	}
	return decodeTxnIndex(b)
}

// openTxnsLocked sets up the transaction state after Open: the open
// transactions at the end come from the active segment's file when a clean
// Close wrote them for this end offset, else from a replay of the active
// segment.
func (l *Log) openTxnsLocked() error {
	a := l.active()
	if f, err := l.readTxnIndexLocked(a); err == nil && f.endOffset == l.end {
		a.txns = segTxns{known: true, base: f.base, aborted: f.aborted}
		l.ongoing = f.end
		return nil
	}
	a.txns = segTxns{}
	l.ongoing = nil
	return l.txnLoadLocked(len(l.segs) - 1)
}

// txnResetLocked starts an empty transaction state in the only segment.
func (l *Log) txnResetLocked() {
	l.ongoing = map[int64]OngoingTxn{}
	l.active().txns = segTxns{known: true, base: map[int64]OngoingTxn{}}
	l.txnReady = true
}

// txnRolledLocked starts the new active segment's state (the open
// transactions at its base) and writes the files of both segments.
//
// It returns the .txnindex files to write, which the roll's flush writes
// without mu (rollLocked).
func (l *Log) txnRolledLocked(sealed, active *segment) []sideFile {
	var files []sideFile
	if sealed.txns.known {
		files = append(files, l.txnIndexFileLocked(sealed, nil, -1))
	}
	active.txns = segTxns{known: true, base: maps.Clone(l.ongoing)}
	return append(files, l.txnIndexFileLocked(active, nil, -1))
}

// The .txnindex file of a segment, all integers big-endian:
//
//	0  [4]byte "RTXI"
//	4  uint8   version (1)
//	5  uint32  B, open transactions at the segment's base
//	9  int64   E, the offset of the end state below (a clean close of
//	           the active segment), or -1 (txnEndSealed: the file of a
//	           sealed segment, its aborted entries complete) or -2
//	           (txnEndBaseOnly: written while the segment was active, at
//	           its roll or after Truncate; only its base state is kept)
//	17 uint32  N, open transactions at E
//	21 uint32  A, aborted transactions
//	25 B and then N entries of 18 bytes: int64 producer id, int16 epoch,
//	   int64 first offset
//	   A entries of 32 bytes: int64 producer id, int64 first offset,
//	   int64 last offset, int64 last stable offset
//	   uint32  CRC-32C of every byte before it
//
// A sealed segment trusts the aborted entries of its file only when E is
// txnEndSealed, written by the roll's flush once the segment is sealed
// (or by a rebuild of a sealed segment). A power cut can leave a sealed
// segment below the saved recovery point with an older file: the roll
// started the next segment at a recovery point checkpointed after an
// fsync, the next segment's directory entry became durable (any directory
// fsync, a journal commit) and the roll's flush had not written the
// segment's file yet. That file is the one its roll wrote (no aborted
// entries), a clean close's (complete up to E only) or, after Truncate,
// the base-only one Truncate wrote in place of the sealed one, whose
// aborted entries named markers the cut removed. Such a segment is
// replayed from its base state.
const (
	txnEndSealed   = -1
	txnEndBaseOnly = -2
)

const (
	txnIndexMagic   = "RTXI"
	txnIndexHead    = 25
	txnOngoingSize  = 18
	txnAbortedSize  = 32
	txnIndexVersion = 1
)

type txnIndexFile struct {
	base      map[int64]OngoingTxn
	endOffset int64
	end       map[int64]OngoingTxn
	aborted   []AbortedTxn
}

func encodeTxnIndex(f txnIndexFile) []byte {
	b := append([]byte(txnIndexMagic), txnIndexVersion)
	b = binary.BigEndian.AppendUint32(b, uint32(len(f.base)))
	b = binary.BigEndian.AppendUint64(b, uint64(f.endOffset))
	b = binary.BigEndian.AppendUint32(b, uint32(len(f.end)))
	b = binary.BigEndian.AppendUint32(b, uint32(len(f.aborted)))
	for _, m := range []map[int64]OngoingTxn{f.base, f.end} {
		for _, id := range slices.Sorted(maps.Keys(m)) {
			t := m[id]
			b = binary.BigEndian.AppendUint64(b, uint64(t.ProducerID))
			b = binary.BigEndian.AppendUint16(b, uint16(t.ProducerEpoch))
			b = binary.BigEndian.AppendUint64(b, uint64(t.FirstOffset))
		}
	}
	for _, a := range f.aborted {
		for _, v := range []int64{a.ProducerID, a.FirstOffset, a.LastOffset, a.LastStableOffset} {
			b = binary.BigEndian.AppendUint64(b, uint64(v))
		}
	}
	return appendFileCRC(b)
}

var errBadTxnIndex = errors.New("bad transaction index")

// fileCRC is the table of the CRC-32C of this package's own binary files
// (.txnindex, and the trailers of .index and .timeindex in index.go);
// batch CRCs are recordbatch's alone.
var fileCRC = crc32.MakeTable(crc32.Castagnoli)

// appendFileCRC appends the CRC-32C trailer of one of this package's own
// files to its body b.
func appendFileCRC(b []byte) []byte {
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, fileCRC))
}

// checkFileCRC splits a file of this package's own, at least 4 bytes
// long, into its body and reports whether its CRC-32C trailer matches.
func checkFileCRC(b []byte) (body []byte, ok bool) {
	body = b[:len(b)-4]
	return body, crc32.Checksum(body, fileCRC) == binary.BigEndian.Uint32(b[len(body):])
}

// decodeTxnIndex parses a .txnindex file. Its counts are checked against
// the file's length before anything is allocated.
func decodeTxnIndex(b []byte) (txnIndexFile, error) {
	if len(b) < txnIndexHead+4 || string(b[:4]) != txnIndexMagic || b[4] != txnIndexVersion {
		return txnIndexFile{}, fmt.Errorf("%w: bad header", errBadTxnIndex)
	}
	body, ok := checkFileCRC(b)
	if !ok {
		return txnIndexFile{}, fmt.Errorf("%w: checksum mismatch", errBadTxnIndex)
	}
	nb := uint64(binary.BigEndian.Uint32(b[5:]))
	f := txnIndexFile{endOffset: int64(binary.BigEndian.Uint64(b[9:]))}
	ne := uint64(binary.BigEndian.Uint32(b[17:]))
	na := uint64(binary.BigEndian.Uint32(b[21:]))
	if uint64(len(body)-txnIndexHead) != (nb+ne)*txnOngoingSize+na*txnAbortedSize {
		return txnIndexFile{}, fmt.Errorf("%w: %d bytes for %d+%d open and %d aborted transactions", errBadTxnIndex, len(body), nb, ne, na)
	}
	p := body[txnIndexHead:]
	readOngoing := func(n uint64) map[int64]OngoingTxn {
		m := make(map[int64]OngoingTxn, n)
		for range n {
			t := OngoingTxn{ProducerID: int64(binary.BigEndian.Uint64(p)), ProducerEpoch: int16(binary.BigEndian.Uint16(p[8:])),
				FirstOffset: int64(binary.BigEndian.Uint64(p[10:]))}
			m[t.ProducerID] = t
			p = p[txnOngoingSize:]
		}
		return m
	}
	f.base, f.end = readOngoing(nb), readOngoing(ne)
	if uint64(len(f.base)) != nb || uint64(len(f.end)) != ne {
		return txnIndexFile{}, fmt.Errorf("%w: a producer is open twice", errBadTxnIndex)
	}
	f.aborted = make([]AbortedTxn, 0, na)
	for range na {
		f.aborted = append(f.aborted, AbortedTxn{ProducerID: int64(binary.BigEndian.Uint64(p)), FirstOffset: int64(binary.BigEndian.Uint64(p[8:])),
			LastOffset: int64(binary.BigEndian.Uint64(p[16:])), LastStableOffset: int64(binary.BigEndian.Uint64(p[24:]))})
		p = p[txnAbortedSize:]
	}
	return f, nil
}
