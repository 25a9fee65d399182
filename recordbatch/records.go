package recordbatch

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

// RawRecord is one parsed RawRecord; key, value and headers alias the bytes it
// was parsed from. A nil value is a tombstone.
type RawRecord struct {
	Offset    int64 // offset delta until ForEachRecord adds the base
	Timestamp int64 // timestamp delta until ForEachRecord adds the base
	Key       []byte
	Value     []byte
	headers   []byte // headerCount records of the header section, validated
	nHeaders  int
	Raw       []byte // the whole encoded record, length prefix included
}

// ForEachRecord calls fn with each record of the stored batch buf (header
// h) until fn returns false. Compressed records are inflated one at a time
// into one buffer, never the whole batch: a record's slices are valid only
// during its call.
func ForEachRecord(h Header, buf []byte, fn func(r RawRecord) bool) error {
	src, err := openRecords(h.Codec(), buf[HeaderLen:h.Size], maxDecompressed)
	if err != nil {
		return err
	}
	defer src.release()
	src.setTotalLimit(0)
	logAppendTime := h.Attributes&AttrLogAppendTime != 0
	for i := int32(0); i < h.NumRecords; i++ {
		raw, err := src.next()
		if err != nil {
			return recordErr(i, err)
		}
		r, _, err := decodeRecord(raw)
		if err != nil {
			return recordErr(i, err)
		}
		r.Offset += h.BaseOffset
		if logAppendTime {
			r.Timestamp = h.MaxTimestamp
		} else {
			r.Timestamp += h.FirstTimestamp
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
func decodeRecord(b []byte) (RawRecord, int, error) {
	var r RawRecord
	length, n := binary.Varint(b)
	if n <= 0 || length < 0 || int64(len(b)-n) < length {
		return r, 0, errRecordLength
	}
	total := n + int(length)
	r.Raw = b[:total]
	p := b[n:total]
	if len(p) < 1 {
		return r, 0, fmt.Errorf("short record")
	}
	p = p[1:] // attributes
	var ok bool
	if r.Timestamp, p, ok = varint(p); !ok {
		return r, 0, fmt.Errorf("bad timestamp delta")
	}
	if r.Offset, p, ok = varint(p); !ok || r.Offset < 0 || r.Offset > math.MaxInt32 {
		return r, 0, fmt.Errorf("bad offset delta")
	}
	if r.Key, p, ok = varbytes(p); !ok {
		return r, 0, fmt.Errorf("bad key")
	}
	if r.Value, p, ok = varbytes(p); !ok {
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
func (r RawRecord) eachHeader(fn func(k, v []byte)) {
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

// Rules are what ValidateRecords checks beyond the format.
type Rules struct {
	FramingOnly  bool  // Config.FramingOnly: walk uncompressed record lengths only
	ExactOffsets bool  // offset delta i for record i (producer batches)
	NeedKeys     bool  // a compacted topic: every record has a key
	MaxInflated  int64 // bound on the decompressed record section
}

// ValidateRecords checks every record of the producer batch h (the whole
// batch is buf) the way Kafka's log validator does: the codec's stream
// decodes, exactly numRecords well-formed records fill it, offset deltas run
// 0..lastOffsetDelta, timestamps do not overflow, and keys are present when
// the topic is compacted. Compressed sections are inflated as a stream into
// one record-sized buffer, never whole, and at most maxInflated bytes.
func ValidateRecords(h Header, buf []byte, rules Rules) error {
	if rules.FramingOnly {
		return checkFraming(h, buf)
	}
	if h.Codec() == CodecNone {
		// Walked in place by a source on the stack: openRecords's, behind
		// its interface, was an allocation a batch on every append (issue 19).
		s := sliceSource{b: buf[HeaderLen:h.Size]}
		return checkRecords(h, rules, s.next, s.finish)
	}
	src, err := openRecords(h.Codec(), buf[HeaderLen:h.Size], rules.MaxInflated)
	if err != nil {
		return err
	}
	defer src.release()
	return checkRecords(h, rules, src.next, src.finish)
}

// checkRecords is ValidateRecords's check of the records next returns
// (then finish: nothing after them).
func checkRecords(h Header, rules Rules, next func() ([]byte, error), finish func() error) error {
	for i := int32(0); i < h.NumRecords; i++ {
		raw, err := next()
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
	if err := finish(); err != nil {
		return fmt.Errorf("%w: after %d records: %v", ErrCorruptBatch, h.NumRecords, err)
	}
	return nil
}

// checkFraming is the check Append made before records were validated:
// an uncompressed section holds exactly numRecords length-prefixed records;
// a compressed one is not inflated.
func checkFraming(h Header, buf []byte) error {
	if h.Codec() != CodecNone {
		return nil
	}
	s := sliceSource{b: buf[HeaderLen:h.Size]}
	for i := int32(0); i < h.NumRecords; i++ {
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
func checkRecord(h Header, r RawRecord, i int32, rules Rules) error {
	switch {
	case rules.ExactOffsets && r.Offset != int64(i):
		return fmt.Errorf("%w: record %d has offset delta %d", ErrCorruptBatch, i, r.Offset)
	case !rules.ExactOffsets && r.Offset > int64(h.LastOffsetDelta):
		return fmt.Errorf("%w: record %d has offset delta %d past the batch's %d", ErrCorruptBatch, i, r.Offset, h.LastOffsetDelta)
	case (r.Timestamp > 0 && h.FirstTimestamp > math.MaxInt64-r.Timestamp) ||
		(r.Timestamp < 0 && h.FirstTimestamp < math.MinInt64-r.Timestamp):
		return fmt.Errorf("%w: record %d timestamp delta %d overflows", ErrCorruptBatch, i, r.Timestamp)
	case rules.NeedKeys && r.Key == nil && !h.IsControl():
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
	Headers   []RecordHeader
	// Size is the record's decompressed encoded size, framing included
	// (at least 7 bytes, so even empty records add up).
	Size int
}

// RecordHeader is one record header.
type RecordHeader struct {
	Key   string
	Value []byte
}

// Records decodes the records of one batch incrementally: a reader that
// stops early (enough records, enough bytes) inflates no further. Not safe
// for concurrent use; Close returns its decompressor to the pool.
type Records struct {
	h   Header
	src recordSource
	i   int32
	err error
}

// Info is the header of one batch.
type Info struct {
	BaseOffset     int64
	LastOffset     int64
	Size           int // bytes of the whole batch
	Attributes     int16
	Control        bool // a transaction marker (ParseControl)
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
func (b Info) NextOffset() int64 { return b.LastOffset + 1 }

// Next checks the batch at the start of data (length, magic, CRC-32C,
// record count no more than its offsets) and returns its header, for
// readers and for callers that split produced or replicated batches. ok is false, with no error, when
// data holds only part of a batch (a read cut at its byte limit). A
// corrupt batch's header is returned with the error when its length could
// be read, so a reader can name it and move past it.
func Next(data []byte) (info Info, ok bool, err error) {
	if len(data) < HeaderLen {
		return Info{}, false, nil
	}
	size, err := SizeFromPrefix(data)
	if err != nil {
		return Info{}, false, err
	}
	if size > int64(len(data)) {
		return Info{}, false, nil
	}
	h, err := Check(data, 0, CountCompacted)
	info = Info{BaseOffset: h.BaseOffset, LastOffset: h.LastOffset(), Size: int(size),
		Attributes: h.Attributes, Control: h.IsControl(), Transactional: h.Attributes&AttrTransactional != 0, LogAppendTime: h.Attributes&AttrLogAppendTime != 0,
		FirstTimestamp: h.FirstTimestamp, MaxTimestamp: h.MaxTimestamp, NumRecords: h.NumRecords}
	if len(data) >= HeaderLen {
		info.ProducerID = int64(binary.BigEndian.Uint64(data[ProducerIDAt:]))
		info.ProducerEpoch = int16(binary.BigEndian.Uint16(data[ProducerEpochAt:]))
		info.BaseSequence = int32(binary.BigEndian.Uint32(data[BaseSequenceAt:]))
	}
	return info, true, err
}

// Decode starts decoding the records of the batch at the start of
// batch, checked by Next. maxInflated bounds one record's decoded size
// (a larger one is ErrInflatedTooLarge); the stream as a whole is not
// bounded, since a reader that stops early never inflates the rest.
func Decode(batch []byte, maxInflated int64) (*Records, error) {
	h, err := Check(batch, 0, CountCompacted)
	if err != nil {
		return nil, err
	}
	src, err := openRecords(h.Codec(), batch[HeaderLen:h.Size], maxInflated)
	if err != nil {
		return nil, err
	}
	src.setTotalLimit(0)
	return &Records{h: h, src: src}, nil
}

// DecodeNext is Decode for the batch Next has just checked
// and described as info (batch is data[:info.Size]): the header and the
// CRC-32C are not checked a second time, which on an HTTP read of
// uncompressed 1 KiB records was a tenth of the decoding cost.
func DecodeNext(batch []byte, info Info, maxInflated int64) (*Records, error) {
	if len(batch) < HeaderLen || len(batch) != info.Size {
		return nil, fmt.Errorf("%w: %d bytes given for a %d-byte batch", ErrCorruptBatch, len(batch), info.Size)
	}
	h := ParseHeader(batch)
	if h.BaseOffset != info.BaseOffset || h.Size != int64(info.Size) || h.NumRecords != info.NumRecords {
		return nil, fmt.Errorf("%w: the batch is not the one NextBatch described", ErrCorruptBatch)
	}
	src, err := openRecords(h.Codec(), batch[HeaderLen:h.Size], maxInflated)
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
func (it *Records) decodeNext() (RawRecord, bool) {
	if it.err != nil || it.i >= it.h.NumRecords {
		return RawRecord{}, false
	}
	raw, err := it.src.next()
	var r RawRecord
	if err == nil {
		r, _, err = decodeRecord(raw)
	}
	if err == nil {
		err = checkRecord(it.h, r, it.i, Rules{})
	} else {
		err = recordErr(it.i, err)
	}
	if err != nil {
		it.err = err
		return RawRecord{}, false
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
	*rec = Record{Offset: it.h.BaseOffset + r.Offset, Timestamp: it.h.FirstTimestamp + r.Timestamp,
		Key: r.Key, Value: r.Value, Size: len(r.Raw)}
	if it.h.Attributes&AttrLogAppendTime != 0 {
		rec.Timestamp = it.h.MaxTimestamp
	}
	if r.nHeaders > 0 {
		r.eachHeader(func(k, v []byte) {
			hs = append(hs, RecordHeader{Key: string(k), Value: v})
		})
	}
	rec.Headers = hs
	return true
}

// export copies r out of the decoder's buffer.
func (it *Records) export(r RawRecord) Record {
	out := Record{Offset: it.h.BaseOffset + r.Offset, Timestamp: it.h.FirstTimestamp + r.Timestamp}
	if it.h.Attributes&AttrLogAppendTime != 0 {
		out.Timestamp = it.h.MaxTimestamp
	}
	// One allocation holds key and value; headers get theirs.
	both := make([]byte, 0, len(r.Key)+len(r.Value))
	if r.Key != nil {
		both = append(both, r.Key...)
		out.Key = both[:len(r.Key):len(r.Key)]
	}
	if r.Value != nil {
		both = append(both, r.Value...)
		out.Value = both[len(both)-len(r.Value):]
	}
	out.Size = len(r.Raw)
	if r.nHeaders > 0 {
		out.Headers = make([]RecordHeader, 0, r.nHeaders)
		r.eachHeader(func(k, v []byte) {
			h := RecordHeader{Key: string(k)}
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
