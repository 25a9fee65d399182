package segments

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
)

// RecordBatch v2 header layout (all integers big-endian). The CRC-32C at
// crcAt covers every byte from attrAt to the end of the batch, so baseOffset
// and partitionLeaderEpoch can be rewritten without touching it.
const (
	baseOffsetAt      = 0  // int64
	lengthAt          = 8  // int32: bytes after this field
	epochAt           = 12 // int32 partitionLeaderEpoch
	magicAt           = 16 // int8, always 2
	crcAt             = 17 // uint32 CRC-32C of [attrAt:]
	attrAt            = 21 // int16 attributes
	lastOffsetDeltaAt = 23 // int32
	firstTimestampAt  = 27 // int64
	maxTimestampAt    = 35 // int64
	producerIDAt      = 43 // int64
	producerEpochAt   = 51 // int16
	baseSequenceAt    = 53 // int32
	numRecordsAt      = 57 // int32
	batchHeaderLen    = 61

	// batchPrefixLen is the part of the header before (and excluding) the
	// length-counted bytes.
	batchPrefixLen = 12
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// batchHeader holds the header fields the log needs.
type batchHeader struct {
	baseOffset      int64
	size            int64 // whole batch, prefix included
	epoch           int32
	attributes      int16
	lastOffsetDelta int32
	firstTimestamp  int64
	maxTimestamp    int64
	numRecords      int32
}

func (h batchHeader) lastOffset() int64 { return h.baseOffset + int64(h.lastOffsetDelta) }
func (h batchHeader) nextOffset() int64 { return h.lastOffset() + 1 }
func (h batchHeader) compression() int  { return int(h.attributes & 0x7) }
func (h batchHeader) isControl() bool   { return h.attributes&0x20 != 0 }

// parseHeader decodes the fixed header; b must hold at least batchHeaderLen bytes.
func parseHeader(b []byte) batchHeader {
	return batchHeader{
		baseOffset:      int64(binary.BigEndian.Uint64(b[baseOffsetAt:])),
		size:            int64(int32(binary.BigEndian.Uint32(b[lengthAt:]))) + batchPrefixLen,
		epoch:           int32(binary.BigEndian.Uint32(b[epochAt:])),
		attributes:      int16(binary.BigEndian.Uint16(b[attrAt:])),
		lastOffsetDelta: int32(binary.BigEndian.Uint32(b[lastOffsetDeltaAt:])),
		firstTimestamp:  int64(binary.BigEndian.Uint64(b[firstTimestampAt:])),
		maxTimestamp:    int64(binary.BigEndian.Uint64(b[maxTimestampAt:])),
		numRecords:      int32(binary.BigEndian.Uint32(b[numRecordsAt:])),
	}
}

// batchSizeFromPrefix returns the whole size of the batch whose first 12
// bytes are p, or an error when the length field is impossible.
func batchSizeFromPrefix(p []byte) (int64, error) {
	n := int64(int32(binary.BigEndian.Uint32(p[lengthAt:])))
	if n < batchHeaderLen-batchPrefixLen {
		return 0, fmt.Errorf("%w: length %d shorter than the header", ErrCorruptBatch, n)
	}
	return n + batchPrefixLen, nil
}

// countRule says how numRecords must relate to lastOffsetDelta.
type countRule int

const (
	// countExact: a producer batch, numRecords == lastOffsetDelta+1 > 0.
	countExact countRule = iota
	// countCompacted: a batch that may have been compacted by a leader,
	// 0 <= numRecords <= lastOffsetDelta+1.
	countCompacted
)

// checkBatch validates the batch at the start of b and returns its header.
// maxSize bounds the whole batch size (<= 0: unbounded).
func checkBatch(b []byte, maxSize int64, rule countRule) (batchHeader, error) {
	if len(b) < batchHeaderLen {
		return batchHeader{}, fmt.Errorf("%w: %d bytes, shorter than the %d-byte header", ErrCorruptBatch, len(b), batchHeaderLen)
	}
	size, err := batchSizeFromPrefix(b)
	if err != nil {
		return batchHeader{}, err
	}
	if size > int64(len(b)) {
		return batchHeader{}, fmt.Errorf("%w: length says %d bytes, %d present", ErrCorruptBatch, size, len(b))
	}
	if b[magicAt] != 2 {
		return batchHeader{}, fmt.Errorf("%w: magic %d, want 2", ErrCorruptBatch, int8(b[magicAt]))
	}
	h := parseHeader(b)
	if want, got := binary.BigEndian.Uint32(b[crcAt:]), crc32.Checksum(b[attrAt:size], castagnoli); want != got {
		return h, fmt.Errorf("%w: crc32c %08x, header says %08x", ErrCorruptBatch, got, want)
	}
	if h.lastOffsetDelta < 0 || h.numRecords < 0 {
		return h, fmt.Errorf("%w: negative lastOffsetDelta %d or record count %d", ErrCorruptBatch, h.lastOffsetDelta, h.numRecords)
	}
	switch rule {
	case countExact:
		if int64(h.numRecords) != int64(h.lastOffsetDelta)+1 {
			return h, fmt.Errorf("%w: %d records but lastOffsetDelta %d", ErrCorruptBatch, h.numRecords, h.lastOffsetDelta)
		}
	case countCompacted:
		if int64(h.numRecords) > int64(h.lastOffsetDelta)+1 {
			return h, fmt.Errorf("%w: %d records but lastOffsetDelta %d", ErrCorruptBatch, h.numRecords, h.lastOffsetDelta)
		}
	}
	if maxSize > 0 && size > maxSize {
		return h, fmt.Errorf("%w: %d bytes, limit %d", ErrBatchTooLarge, size, maxSize)
	}
	return h, nil
}

// splitBatches validates every batch of buf (one or more concatenated
// batches) and returns their headers. It stops at the first bad batch.
func splitBatches(buf []byte, maxSize int64, rule countRule) ([]batchHeader, error) {
	if len(buf) == 0 {
		return nil, fmt.Errorf("%w: no batches", ErrCorruptBatch)
	}
	var hs []batchHeader
	for pos := 0; pos < len(buf); {
		h, err := checkBatch(buf[pos:], maxSize, rule)
		if err != nil {
			return nil, fmt.Errorf("batch %d at byte %d: %w", len(hs), pos, err)
		}
		hs = append(hs, h)
		pos += int(h.size)
	}
	return hs, nil
}

// validateBatchRecords checks the records of every batch of buf, whose
// headers splitBatches returned. A replica's batches (AppendReplicated) are
// not checked again: their leader did, and compaction may have changed them.
func validateBatchRecords(buf []byte, hs []batchHeader, rules checkRules) error {
	pos := 0
	for i, h := range hs {
		if err := validateRecords(h, buf[pos:pos+int(h.size)], rules); err != nil {
			return fmt.Errorf("batch %d at byte %d: %w", i, pos, err)
		}
		pos += int(h.size)
	}
	return nil
}

// ValidateBatches checks one or more concatenated RecordBatch v2 the way
// Append does (magic, length, CRC-32C, record count against lastOffsetDelta,
// maxMessageBytes when > 0, every record, DefaultMaxInflatedBytes) and
// returns the number of batches and records. Errors wrap ErrCorruptBatch,
// ErrBatchTooLarge or ErrInflatedTooLarge.
func ValidateBatches(buf []byte, maxMessageBytes int32) (batches, records int, err error) {
	hs, err := splitBatches(buf, int64(maxMessageBytes), countExact)
	if err == nil {
		err = validateBatchRecords(buf, hs, checkRules{exactOffsets: true, maxInflated: DefaultMaxInflatedBytes})
	}
	if err != nil {
		return 0, 0, fmt.Errorf("segments: %w", err)
	}
	for _, h := range hs {
		records += int(h.numRecords)
	}
	return len(hs), records, nil
}

// setBaseOffset and setEpoch rewrite the fields outside the CRC.
func setBaseOffset(b []byte, off int64) { binary.BigEndian.PutUint64(b[baseOffsetAt:], uint64(off)) }
func setEpoch(b []byte, epoch int32)    { binary.BigEndian.PutUint32(b[epochAt:], uint32(epoch)) }

// fitsRelative reports whether off can be stored relative to base in a uint32.
func fitsRelative(base, off int64) bool { return off >= base && off-base <= math.MaxUint32 }
