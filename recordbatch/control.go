package recordbatch

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Control batches: the transaction markers a transaction coordinator has
// written into a partition (Kafka's EndTransactionMarker). A control batch
// has attributes bit 5 (control) and bit 4 (transactional) set, the
// producer id and epoch of the transaction it ends, no sequence (-1), and
// exactly one uncompressed record:
//
//	key:   int16 version (0), int16 type (0 abort, 1 commit)
//	value: int16 version (0), int32 coordinator epoch
//
// Readers that find a control batch never hand its record to a consumer.

// ControlType is the type of a control record.
type ControlType int16

// Control record types, with Kafka's values.
const (
	ControlAbort  ControlType = 0
	ControlCommit ControlType = 1
)

func (t ControlType) String() string {
	switch t {
	case ControlAbort:
		return "abort"
	case ControlCommit:
		return "commit"
	}
	return fmt.Sprintf("control type %d", int16(t))
}

// Marker is a transaction marker: the end of the transaction of one
// producer (id and epoch) in one partition.
type Marker struct {
	ProducerID       int64
	ProducerEpoch    int16
	CoordinatorEpoch int32
	Type             ControlType // ControlAbort or ControlCommit
}

// BuildControl encodes m as a control batch with base offset 0 (the
// log assigns the real one) and timestamp ts (ms), CRC included.
func BuildControl(m Marker, ts int64) []byte {
	var key, value [6]byte
	binary.BigEndian.PutUint16(key[2:], uint16(m.Type)) // version 0
	binary.BigEndian.PutUint32(value[2:], uint32(m.CoordinatorEpoch))
	rec := []byte{0}                  // attributes
	rec = binary.AppendVarint(rec, 0) // timestamp delta
	rec = binary.AppendVarint(rec, 0) // offset delta
	rec = binary.AppendVarint(rec, 4)
	rec = append(rec, key[:4]...)
	rec = binary.AppendVarint(rec, 6)
	rec = append(rec, value[:]...)
	rec = binary.AppendVarint(rec, 0) // headers

	b := make([]byte, HeaderLen, HeaderLen+binary.MaxVarintLen64+len(rec))
	b = binary.AppendVarint(b, int64(len(rec)))
	b = append(b, rec...)
	binary.BigEndian.PutUint32(b[LengthAt:], uint32(len(b)-PrefixLen))
	binary.BigEndian.PutUint32(b[EpochAt:], 0xffffffff) // -1 until appended
	b[MagicAt] = 2
	binary.BigEndian.PutUint16(b[AttrAt:], AttrControl|AttrTransactional)
	binary.BigEndian.PutUint64(b[FirstTimestampAt:], uint64(ts))
	binary.BigEndian.PutUint64(b[MaxTimestampAt:], uint64(ts))
	binary.BigEndian.PutUint64(b[ProducerIDAt:], uint64(m.ProducerID))
	binary.BigEndian.PutUint16(b[ProducerEpochAt:], uint16(m.ProducerEpoch))
	binary.BigEndian.PutUint32(b[BaseSequenceAt:], 0xffffffff)
	binary.BigEndian.PutUint32(b[NumRecordsAt:], 1)
	binary.BigEndian.PutUint32(b[CRCAt:], crc32.Checksum(b[AttrAt:], castagnoli))
	return b
}

// ParseControl decodes the marker of the control batch at the start
// of batch (checked as Next does). A batch that is not a control
// batch, or whose record is not a version 0 marker, is ErrCorruptBatch;
// Kafka ignores unknown control types, so callers may skip a batch whose
// Type is neither abort nor commit.
func ParseControl(batch []byte) (Marker, error) {
	h, err := Check(batch, 0, CountCompacted)
	if err != nil {
		return Marker{}, err
	}
	if !h.IsControl() {
		return Marker{}, fmt.Errorf("%w: not a control batch", ErrCorruptBatch)
	}
	m := Marker{ProducerID: int64(binary.BigEndian.Uint64(batch[ProducerIDAt:])),
		ProducerEpoch: int16(binary.BigEndian.Uint16(batch[ProducerEpochAt:]))}
	if h.Codec() != CodecNone || h.NumRecords != 1 {
		return m, fmt.Errorf("%w: a control batch holds one uncompressed record, not %d (codec %d)", ErrCorruptBatch, h.NumRecords, h.Codec())
	}
	s := sliceSource{b: batch[HeaderLen:h.Size]}
	raw, err := s.next()
	if err != nil {
		return m, fmt.Errorf("%w: control record: %v", ErrCorruptBatch, err)
	}
	r, _, err := decodeRecord(raw)
	if err != nil {
		return m, fmt.Errorf("%w: control record: %v", ErrCorruptBatch, err)
	}
	if len(r.Key) < 4 || binary.BigEndian.Uint16(r.Key) != 0 {
		return m, fmt.Errorf("%w: control record key of %d bytes, version 0 wanted", ErrCorruptBatch, len(r.Key))
	}
	m.Type = ControlType(binary.BigEndian.Uint16(r.Key[2:]))
	if len(r.Value) >= 6 {
		m.CoordinatorEpoch = int32(binary.BigEndian.Uint32(r.Value[2:]))
	}
	return m, nil
}
