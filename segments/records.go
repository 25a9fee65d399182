package segments

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// The records of a batch (RecordBatch v2), after the 61-byte header and
// decompression, are numRecords records back to back, each:
//
//	varint  length          bytes after this field
//	int8    attributes      unused
//	varlong timestampDelta  from the batch's baseTimestamp
//	varint  offsetDelta     from the batch's baseOffset
//	varint  keyLength       -1: no key
//	bytes   key
//	varint  valueLength     -1: no value (a tombstone)
//	bytes   value
//	varint  headerCount
//	        headers         headerCount x (varint keyLength >= 0, key,
//	                        varint valueLength (-1: none), value)
//
// This file is the one parser of that format in runnel: Append validates
// every record with it, compaction and timestamp search walk records with
// it, and readers that need records decoded (HTTP consumers) use Records.

// record is one parsed record; key, value and headers alias the bytes it
// was parsed from. A nil value is a tombstone.
type record struct {
	offset    int64 // offset delta until forEachRecord adds the base
	timestamp int64 // timestamp delta until forEachRecord adds the base
	key       []byte
	value     []byte
	headers   []byte // headerCount records of the header section, validated
	nHeaders  int
	raw       []byte // the whole encoded record, length prefix included
}

// forEachRecord calls fn with each record of the stored batch buf (header
// h) until fn returns false. Compressed records are inflated one at a time
// into one buffer, never the whole batch: a record's slices are valid only
// during its call.
func forEachRecord(h batchHeader, buf []byte, fn func(r record) bool) error {
	src, err := openRecords(h.compression(), buf[batchHeaderLen:h.size], maxDecompressed)
	if err != nil {
		return err
	}
	defer src.release()
	src.setTotalLimit(0)
	logAppendTime := h.attributes&0x8 != 0
	for i := int32(0); i < h.numRecords; i++ {
		raw, err := src.next()
		if err != nil {
			return recordErr(i, err)
		}
		r, _, err := decodeRecord(raw)
		if err != nil {
			return recordErr(i, err)
		}
		r.offset += h.baseOffset
		if logAppendTime {
			r.timestamp = h.maxTimestamp
		} else {
			r.timestamp += h.firstTimestamp
		}
		if !fn(r) {
			return nil
		}
	}
	return nil
}

var (
	errRecordLength = errors.New("bad record length")
	errRecordSize   = errors.New("record fields do not fill its length")
)

// decodeRecord parses one record at the start of b, checking every field and
// that the fields fill exactly the record's length (as Kafka's
// DefaultRecord.readFrom does); offset and timestamp are the deltas.
func decodeRecord(b []byte) (record, int, error) {
	var r record
	length, n := binary.Varint(b)
	if n <= 0 || length < 0 || int64(len(b)-n) < length {
		return r, 0, errRecordLength
	}
	total := n + int(length)
	r.raw = b[:total]
	p := b[n:total]
	if len(p) < 1 {
		return r, 0, fmt.Errorf("short record")
	}
	p = p[1:] // attributes
	var ok bool
	if r.timestamp, p, ok = varint(p); !ok {
		return r, 0, fmt.Errorf("bad timestamp delta")
	}
	if r.offset, p, ok = varint(p); !ok || r.offset < 0 || r.offset > math.MaxInt32 {
		return r, 0, fmt.Errorf("bad offset delta")
	}
	if r.key, p, ok = varbytes(p); !ok {
		return r, 0, fmt.Errorf("bad key")
	}
	if r.value, p, ok = varbytes(p); !ok {
		return r, 0, fmt.Errorf("bad value")
	}
	count, p, ok := varint(p)
	// Each header takes at least two bytes, which bounds the loop.
	if !ok || count < 0 || count > int64(len(p)) {
		return r, 0, fmt.Errorf("bad header count")
	}
	r.headers, r.nHeaders = p, int(count)
	for i := 0; i < r.nHeaders; i++ {
		var k []byte
		if k, p, ok = varbytes(p); !ok || k == nil {
			return r, 0, fmt.Errorf("bad header %d key", i)
		}
		if _, p, ok = varbytes(p); !ok {
			return r, 0, fmt.Errorf("bad header %d value", i)
		}
	}
	if len(p) != 0 {
		return r, 0, errRecordSize
	}
	return r, total, nil
}

// eachHeader calls fn with the headers of a record decodeRecord accepted.
func (r record) eachHeader(fn func(k, v []byte)) {
	p := r.headers
	for i := 0; i < r.nHeaders; i++ {
		var k, v []byte
		k, p, _ = varbytes(p)
		v, p, _ = varbytes(p)
		fn(k, v)
	}
}

func varint(b []byte) (int64, []byte, bool) {
	v, n := binary.Varint(b)
	if n <= 0 {
		return 0, b, false
	}
	return v, b[n:], true
}

// varbytes reads a varint length and that many bytes; length -1 is nil.
func varbytes(b []byte) ([]byte, []byte, bool) {
	l, b, ok := varint(b)
	switch {
	case !ok || l < -1 || l > int64(len(b)):
		return nil, b, false
	case l == -1:
		return nil, b, true
	}
	return b[:l:l], b[l:], true
}

// checkRules are what validateRecords checks beyond the format.
type checkRules struct {
	framingOnly  bool  // Config.FramingOnly: walk uncompressed record lengths only
	exactOffsets bool  // offset delta i for record i (producer batches)
	needKeys     bool  // a compacted topic: every record has a key
	maxInflated  int64 // bound on the decompressed record section
}

// validateRecords checks every record of the producer batch h (the whole
// batch is buf) the way Kafka's log validator does: the codec's stream
// decodes, exactly numRecords well-formed records fill it, offset deltas run
// 0..lastOffsetDelta, timestamps do not overflow, and keys are present when
// the topic is compacted. Compressed sections are inflated as a stream into
// one record-sized buffer, never whole, and at most maxInflated bytes.
func validateRecords(h batchHeader, buf []byte, rules checkRules) error {
	if rules.framingOnly {
		return checkFraming(h, buf)
	}
	src, err := openRecords(h.compression(), buf[batchHeaderLen:h.size], rules.maxInflated)
	if err != nil {
		return err
	}
	defer src.release()
	for i := int32(0); i < h.numRecords; i++ {
		raw, err := src.next()
		if err != nil {
			return recordErr(i, err)
		}
		r, _, err := decodeRecord(raw)
		if err != nil {
			return recordErr(i, err)
		}
		if err := checkRecord(h, r, i, rules); err != nil {
			return err
		}
	}
	if err := src.finish(); err != nil {
		return fmt.Errorf("%w: after %d records: %v", ErrCorruptBatch, h.numRecords, err)
	}
	return nil
}

// checkFraming is the check Append made before records were validated:
// an uncompressed section holds exactly numRecords length-prefixed records;
// a compressed one is not inflated.
func checkFraming(h batchHeader, buf []byte) error {
	if h.compression() != codecNone {
		return nil
	}
	s := sliceSource{b: buf[batchHeaderLen:h.size]}
	for i := int32(0); i < h.numRecords; i++ {
		if _, err := s.next(); err != nil {
			return recordErr(i, err)
		}
	}
	if err := s.finish(); err != nil {
		return fmt.Errorf("%w: %v", ErrCorruptBatch, err)
	}
	return nil
}

// checkRecord applies rules to the record i of h.
func checkRecord(h batchHeader, r record, i int32, rules checkRules) error {
	switch {
	case rules.exactOffsets && r.offset != int64(i):
		return fmt.Errorf("%w: record %d has offset delta %d", ErrCorruptBatch, i, r.offset)
	case !rules.exactOffsets && r.offset > int64(h.lastOffsetDelta):
		return fmt.Errorf("%w: record %d has offset delta %d past the batch's %d", ErrCorruptBatch, i, r.offset, h.lastOffsetDelta)
	case (r.timestamp > 0 && h.firstTimestamp > math.MaxInt64-r.timestamp) ||
		(r.timestamp < 0 && h.firstTimestamp < math.MinInt64-r.timestamp):
		return fmt.Errorf("%w: record %d timestamp delta %d overflows", ErrCorruptBatch, i, r.timestamp)
	case rules.needKeys && r.key == nil && !h.isControl():
		return fmt.Errorf("%w: record %d has no key; a compacted topic needs one", ErrInvalidRecord, i)
	}
	return nil
}

func recordErr(i int32, err error) error {
	if errors.Is(err, ErrInflatedTooLarge) {
		return fmt.Errorf("record %d: %w", i, err)
	}
	return fmt.Errorf("%w: record %d: %v", ErrCorruptBatch, i, err)
}

// Record is one record decoded for a reader. Its slices are its own (they
// do not alias the batch or any buffer); Value is nil for a tombstone.
type Record struct {
	Offset    int64
	Timestamp int64 // ms since the epoch
	Key       []byte
	Value     []byte
	Headers   []Header
	// Size is the record's decompressed encoded size, framing included
	// (at least 7 bytes, so even empty records add up).
	Size int
}

// Header is one record header.
type Header struct {
	Key   string
	Value []byte
}

// Records decodes the records of one batch incrementally: a reader that
// stops early (enough records, enough bytes) inflates no further. Not safe
// for concurrent use; Close returns its decompressor to the pool.
type Records struct {
	h   batchHeader
	src recordSource
	i   int32
	err error
}

// BatchInfo is the header of one batch.
type BatchInfo struct {
	BaseOffset     int64
	LastOffset     int64
	Size           int // bytes of the whole batch
	Attributes     int16
	Control        bool // a transaction marker (ParseControlBatch)
	Transactional  bool // part of a transaction (control batches are too)
	LogAppendTime  bool
	FirstTimestamp int64
	MaxTimestamp   int64
	ProducerID     int64
	ProducerEpoch  int16
	BaseSequence   int32
	NumRecords     int32
}

// NextOffset is the offset after the batch.
func (b BatchInfo) NextOffset() int64 { return b.LastOffset + 1 }

// NextBatch checks the batch at the start of data (length, magic, CRC-32C,
// record count no more than its offsets) and returns its header, for
// readers and for callers that split produced or replicated batches. ok is false, with no error, when
// data holds only part of a batch (a read cut at its byte limit). A
// corrupt batch's header is returned with the error when its length could
// be read, so a reader can name it and move past it.
func NextBatch(data []byte) (info BatchInfo, ok bool, err error) {
	if len(data) < batchHeaderLen {
		return BatchInfo{}, false, nil
	}
	size, err := batchSizeFromPrefix(data)
	if err != nil {
		return BatchInfo{}, false, err
	}
	if size > int64(len(data)) {
		return BatchInfo{}, false, nil
	}
	h, err := checkBatch(data, 0, countCompacted)
	info = BatchInfo{BaseOffset: h.baseOffset, LastOffset: h.lastOffset(), Size: int(size),
		Attributes: h.attributes, Control: h.isControl(), Transactional: h.attributes&AttrTransactional != 0, LogAppendTime: h.attributes&0x8 != 0,
		FirstTimestamp: h.firstTimestamp, MaxTimestamp: h.maxTimestamp, NumRecords: h.numRecords}
	if len(data) >= batchHeaderLen {
		info.ProducerID = int64(binary.BigEndian.Uint64(data[producerIDAt:]))
		info.ProducerEpoch = int16(binary.BigEndian.Uint16(data[producerEpochAt:]))
		info.BaseSequence = int32(binary.BigEndian.Uint32(data[baseSequenceAt:]))
	}
	return info, true, err
}

// DecodeBatch starts decoding the records of the batch at the start of
// batch, checked by NextBatch. maxInflated bounds one record's decoded size
// (a larger one is ErrInflatedTooLarge); the stream as a whole is not
// bounded, since a reader that stops early never inflates the rest.
func DecodeBatch(batch []byte, maxInflated int64) (*Records, error) {
	h, err := checkBatch(batch, 0, countCompacted)
	if err != nil {
		return nil, err
	}
	src, err := openRecords(h.compression(), batch[batchHeaderLen:h.size], maxInflated)
	if err != nil {
		return nil, err
	}
	src.setTotalLimit(0)
	return &Records{h: h, src: src}, nil
}

// DecodeNextBatch is DecodeBatch for the batch NextBatch has just checked
// and described as info (batch is data[:info.Size]): the header and the
// CRC-32C are not checked a second time, which on an HTTP read of
// uncompressed 1 KiB records was a tenth of the decoding cost.
func DecodeNextBatch(batch []byte, info BatchInfo, maxInflated int64) (*Records, error) {
	if len(batch) < batchHeaderLen || len(batch) != info.Size {
		return nil, fmt.Errorf("%w: %d bytes given for a %d-byte batch", ErrCorruptBatch, len(batch), info.Size)
	}
	h := parseHeader(batch)
	if h.baseOffset != info.BaseOffset || h.size != int64(info.Size) || h.numRecords != info.NumRecords {
		return nil, fmt.Errorf("%w: the batch is not the one NextBatch described", ErrCorruptBatch)
	}
	src, err := openRecords(h.compression(), batch[batchHeaderLen:h.size], maxInflated)
	if err != nil {
		return nil, err
	}
	src.setTotalLimit(0)
	return &Records{h: h, src: src}, nil
}

// Next decodes the next record into rec; false at the end or on an error
// (see Err).
func (it *Records) Next(rec *Record) bool {
	r, ok := it.decodeNext()
	if !ok {
		return false
	}
	*rec = it.export(r)
	return true
}

// decodeNext decodes and checks the next record; false at the end or on an
// error (kept for Err).
func (it *Records) decodeNext() (record, bool) {
	if it.err != nil || it.i >= it.h.numRecords {
		return record{}, false
	}
	raw, err := it.src.next()
	var r record
	if err == nil {
		r, _, err = decodeRecord(raw)
	}
	if err == nil {
		err = checkRecord(it.h, r, it.i, checkRules{})
	} else {
		err = recordErr(it.i, err)
	}
	if err != nil {
		it.err = err
		return record{}, false
	}
	it.i++
	return r, true
}

// NextView is Next without the copies: rec's Key, Value and header values
// alias the decoder's buffer and are valid only until the following call
// (or Close), and rec.Headers' backing array is reused. It is for readers
// that encode each record straight into an output buffer (the HTTP JSON
// consume path), where Next's per-record allocation and copy of key and
// value is most of the cost.
func (it *Records) NextView(rec *Record) bool {
	r, ok := it.decodeNext()
	if !ok {
		return false
	}
	hs := rec.Headers[:0]
	*rec = Record{Offset: it.h.baseOffset + r.offset, Timestamp: it.h.firstTimestamp + r.timestamp,
		Key: r.key, Value: r.value, Size: len(r.raw)}
	if it.h.attributes&0x8 != 0 {
		rec.Timestamp = it.h.maxTimestamp
	}
	if r.nHeaders > 0 {
		r.eachHeader(func(k, v []byte) {
			hs = append(hs, Header{Key: string(k), Value: v})
		})
	}
	rec.Headers = hs
	return true
}

// export copies r out of the decoder's buffer.
func (it *Records) export(r record) Record {
	out := Record{Offset: it.h.baseOffset + r.offset, Timestamp: it.h.firstTimestamp + r.timestamp}
	if it.h.attributes&0x8 != 0 {
		out.Timestamp = it.h.maxTimestamp
	}
	// One allocation holds key and value; headers get theirs.
	both := make([]byte, 0, len(r.key)+len(r.value))
	if r.key != nil {
		both = append(both, r.key...)
		out.Key = both[:len(r.key):len(r.key)]
	}
	if r.value != nil {
		both = append(both, r.value...)
		out.Value = both[len(both)-len(r.value):]
	}
	out.Size = len(r.raw)
	if r.nHeaders > 0 {
		out.Headers = make([]Header, 0, r.nHeaders)
		r.eachHeader(func(k, v []byte) {
			h := Header{Key: string(k)}
			if v != nil {
				h.Value = append(make([]byte, 0, len(v)), v...)
			}
			out.Headers = append(out.Headers, h)
		})
	}
	return out
}

// Err is the error that ended Next early, nil at a clean end.
func (it *Records) Err() error { return it.err }

// Close releases the decompressor; the Records is unusable afterwards.
func (it *Records) Close() {
	if it.src != nil {
		it.src.release()
		it.src = nil
	}
}

// recordSource yields the raw records of a record section one at a time.
type recordSource interface {
	// next returns the next record, length prefix included; the bytes are
	// valid until the following call.
	next() ([]byte, error)
	// finish checks that nothing follows the last record.
	finish() error
	// setTotalLimit bounds the whole section (<= 0: only each record).
	setTotalLimit(n int64)
	release()
}

// sliceSource walks a record section in place: an uncompressed one, or
// one decompressed whole into a pooled buffer (limit and put set).
type sliceSource struct {
	b     []byte
	limit int64  // bound on one record (ErrInflatedTooLarge); 0: none
	put   func() // returns the decompressed buffer to its pool
}

func (s *sliceSource) next() ([]byte, error) {
	length, n := binary.Varint(s.b)
	if n > 0 && s.limit > 0 && length > s.limit {
		return nil, fmt.Errorf("%w: a record of %d bytes, limit %d", ErrInflatedTooLarge, length, s.limit)
	}
	if n <= 0 || length < 0 || int64(len(s.b)-n) < length {
		return nil, errRecordLength
	}
	r := s.b[:n+int(length)]
	s.b = s.b[len(r):]
	return r, nil
}

func (s *sliceSource) finish() error {
	if len(s.b) != 0 {
		return fmt.Errorf("%d bytes after the last record", len(s.b))
	}
	return nil
}

func (s *sliceSource) setTotalLimit(int64) {}
func (s *sliceSource) release() {
	if s.put != nil {
		s.put()
		s.put, s.b = nil, nil
	}
}
