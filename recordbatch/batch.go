package recordbatch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Sentinel errors; callers match them with errors.Is. They are the one set
// of batch errors in runnel: the log's appends and every reader return them.
var (
	ErrCorruptBatch  = errors.New("recordbatch: corrupt record batch")
	ErrBatchTooLarge = errors.New("recordbatch: record batch larger than max.message.bytes")
	// ErrInvalidRecord is a well-formed record refused: a record without
	// a key on a compacted topic, a control batch from a client (Kafka's
	// INVALID_RECORD).
	ErrInvalidRecord = errors.New("recordbatch: invalid record")
	// ErrInflatedTooLarge is a batch whose records decompress past the
	// limit its reader or writer set (for a reader, one such record).
	ErrInflatedTooLarge = errors.New("recordbatch: records decompress past the limit")
)

// RecordBatch v2 header layout (all integers big-endian). The CRC-32C at
// CRCAt covers every byte from AttrAt to the end of the batch, so baseOffset
// and partitionLeaderEpoch can be rewritten without touching it.
const (
	BaseOffsetAt      = 0  // int64
	LengthAt          = 8  // int32: bytes after this field
	EpochAt           = 12 // int32 partitionLeaderEpoch
	MagicAt           = 16 // int8, always 2
	CRCAt             = 17 // uint32 CRC-32C of [AttrAt:]
	AttrAt            = 21 // int16 attributes
	LastOffsetDeltaAt = 23 // int32
	FirstTimestampAt  = 27 // int64
	MaxTimestampAt    = 35 // int64
	ProducerIDAt      = 43 // int64
	ProducerEpochAt   = 51 // int16
	BaseSequenceAt    = 53 // int32
	NumRecordsAt      = 57 // int32
	HeaderLen         = 61

	// PrefixLen is the part of the header before (and excluding) the
	// length-counted bytes.
	PrefixLen = 12
)

// Attribute bits of a batch header.
const (
	AttrCodec         = 0x07 // the compression codec (Codec* below)
	AttrLogAppendTime = 0x08 // timestamps are the broker's (maxTimestamp)
	AttrTransactional = 0x10
	AttrControl       = 0x20 // a transaction marker (control.go)
)

// castagnoli is the table of the batch CRC-32C; only this package computes it.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Header holds the header fields the log needs.
type Header struct {
	BaseOffset      int64
	Size            int64 // whole batch, prefix included
	Epoch           int32
	Attributes      int16
	LastOffsetDelta int32
	FirstTimestamp  int64
	MaxTimestamp    int64
	NumRecords      int32
}

func (h Header) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }
func (h Header) NextOffset() int64 { return h.LastOffset() + 1 }
func (h Header) Codec() int        { return int(h.Attributes & AttrCodec) }
func (h Header) IsControl() bool   { return h.Attributes&AttrControl != 0 }

// ParseHeader decodes the fixed header; b must hold at least HeaderLen bytes.
func ParseHeader(b []byte) Header {
	return Header{
		BaseOffset:      int64(binary.BigEndian.Uint64(b[BaseOffsetAt:])),
		Size:            int64(int32(binary.BigEndian.Uint32(b[LengthAt:]))) + PrefixLen,
		Epoch:           int32(binary.BigEndian.Uint32(b[EpochAt:])),
		Attributes:      int16(binary.BigEndian.Uint16(b[AttrAt:])),
		LastOffsetDelta: int32(binary.BigEndian.Uint32(b[LastOffsetDeltaAt:])),
		FirstTimestamp:  int64(binary.BigEndian.Uint64(b[FirstTimestampAt:])),
		MaxTimestamp:    int64(binary.BigEndian.Uint64(b[MaxTimestampAt:])),
		NumRecords:      int32(binary.BigEndian.Uint32(b[NumRecordsAt:])),
	}
}

// SizeFromPrefix returns the whole size of the batch whose first 12
// bytes are p, or an error when the length field is impossible.
func SizeFromPrefix(p []byte) (int64, error) {
	n := int64(int32(binary.BigEndian.Uint32(p[LengthAt:])))
	if n < HeaderLen-PrefixLen {
		return 0, fmt.Errorf("%w: length %d shorter than the header", ErrCorruptBatch, n)
	}
	return n + PrefixLen, nil
}

// CountRule says how numRecords must relate to lastOffsetDelta.
type CountRule int

const (
	// CountExact: a producer batch, numRecords == lastOffsetDelta+1 > 0.
	CountExact CountRule = iota
	// CountCompacted: a batch that may have been compacted by a leader,
	// 0 <= numRecords <= lastOffsetDelta+1.
	CountCompacted
)

// Check validates the batch at the start of b and returns its header.
// maxSize bounds the whole batch size (<= 0: unbounded).
func Check(b []byte, maxSize int64, rule CountRule) (Header, error) {
	if len(b) < HeaderLen {
		return Header{}, fmt.Errorf("%w: %d bytes, shorter than the %d-byte header", ErrCorruptBatch, len(b), HeaderLen)
	}
	size, err := SizeFromPrefix(b)
	if err != nil {
		return Header{}, err
	}
	if size > int64(len(b)) {
		return Header{}, fmt.Errorf("%w: length says %d bytes, %d present", ErrCorruptBatch, size, len(b))
	}
	if b[MagicAt] != 2 {
		return Header{}, fmt.Errorf("%w: magic %d, want 2", ErrCorruptBatch, int8(b[MagicAt]))
	}
	h := ParseHeader(b)
	if want, got := binary.BigEndian.Uint32(b[CRCAt:]), crc32.Checksum(b[AttrAt:size], castagnoli); want != got {
		return h, fmt.Errorf("%w: crc32c %08x, header says %08x", ErrCorruptBatch, got, want)
	}
	if h.LastOffsetDelta < 0 || h.NumRecords < 0 {
		return h, fmt.Errorf("%w: negative lastOffsetDelta %d or record count %d", ErrCorruptBatch, h.LastOffsetDelta, h.NumRecords)
	}
	switch rule {
	case CountExact:
		if int64(h.NumRecords) != int64(h.LastOffsetDelta)+1 {
			return h, fmt.Errorf("%w: %d records but lastOffsetDelta %d", ErrCorruptBatch, h.NumRecords, h.LastOffsetDelta)
		}
	case CountCompacted:
		if int64(h.NumRecords) > int64(h.LastOffsetDelta)+1 {
			return h, fmt.Errorf("%w: %d records but lastOffsetDelta %d", ErrCorruptBatch, h.NumRecords, h.LastOffsetDelta)
		}
	}
	if maxSize > 0 && size > maxSize {
		return h, fmt.Errorf("%w: %d bytes, limit %d", ErrBatchTooLarge, size, maxSize)
	}
	return h, nil
}

// Split validates every batch of buf (one or more concatenated
// batches) and returns their headers. It stops at the first bad batch.
func Split(buf []byte, maxSize int64, rule CountRule) ([]Header, error) {
	if len(buf) == 0 {
		return nil, fmt.Errorf("%w: no batches", ErrCorruptBatch)
	}
	var hs []Header
	for pos := 0; pos < len(buf); {
		h, err := Check(buf[pos:], maxSize, rule)
		if err != nil {
			return nil, fmt.Errorf("batch %d at byte %d: %w", len(hs), pos, err)
		}
		hs = append(hs, h)
		pos += int(h.Size)
	}
	return hs, nil
}

// ValidateAll checks the records of every batch of buf, whose
// headers Split returned. A replica's batches (AppendReplicated) are
// not checked again: their leader did, and compaction may have changed them.
func ValidateAll(buf []byte, hs []Header, rules Rules) error {
	pos := 0
	for i, h := range hs {
		if err := ValidateRecords(h, buf[pos:pos+int(h.Size)], rules); err != nil {
			return fmt.Errorf("batch %d at byte %d: %w", i, pos, err)
		}
		pos += int(h.Size)
	}
	return nil
}

// Validate checks one or more concatenated RecordBatch v2 the way the
// log's Append does (magic, length, CRC-32C, record count against
// lastOffsetDelta, maxMessageBytes when > 0, every record, maxInflated) and
// returns the number of batches and records. Errors wrap ErrCorruptBatch,
// ErrBatchTooLarge or ErrInflatedTooLarge.
func Validate(buf []byte, maxMessageBytes int32, maxInflated int64) (batches, records int, err error) {
	hs, err := Split(buf, int64(maxMessageBytes), CountExact)
	if err == nil {
		err = ValidateAll(buf, hs, Rules{ExactOffsets: true, MaxInflated: maxInflated})
	}
	if err != nil {
		return 0, 0, err
	}
	for _, h := range hs {
		records += int(h.NumRecords)
	}
	return len(hs), records, nil
}

// SetBaseOffset and SetEpoch rewrite the fields outside the CRC.
func SetBaseOffset(b []byte, off int64) { binary.BigEndian.PutUint64(b[BaseOffsetAt:], uint64(off)) }
func SetEpoch(b []byte, epoch int32)    { binary.BigEndian.PutUint32(b[EpochAt:], uint32(epoch)) }
