package recordbatch

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Writers change a batch only through the functions below (and SetBaseOffset
// and SetEpoch, which touch fields outside the CRC), so the CRC-32C is
// computed in one place.

// SetCRC recomputes the CRC-32C of the one batch b after a change to the
// bytes it covers (attributes on).
func SetCRC(b []byte) {
	binary.BigEndian.PutUint32(b[CRCAt:], crc32.Checksum(b[AttrAt:], castagnoli))
}

// Rebuild encodes a batch with the header of b (base offset, offset range,
// first timestamp and codec unchanged, so record deltas stay valid) holding
// the n records kept, as compaction does; a snappy batch keeps the framing
// (raw or xerial) its producer used.
func Rebuild(h Header, b, kept []byte, n int32, maxTs int64) ([]byte, error) {
	xerialFraming := h.Codec() == CodecSnappy && len(b) > HeaderLen+8 && string(b[HeaderLen:HeaderLen+8]) == string(xerialMagic)
	payload, err := Compress(h.Codec(), kept, xerialFraming)
	if err != nil {
		return nil, err
	}
	out := make([]byte, HeaderLen, HeaderLen+len(payload))
	copy(out, b[:HeaderLen])
	out = append(out, payload...)
	binary.BigEndian.PutUint32(out[LengthAt:], uint32(len(out)-PrefixLen))
	binary.BigEndian.PutUint32(out[NumRecordsAt:], uint32(n))
	if h.Attributes&AttrLogAppendTime == 0 {
		binary.BigEndian.PutUint64(out[MaxTimestampAt:], uint64(maxTs))
	}
	SetCRC(out)
	return out, nil
}

// SetLogAppendTime stamps the one batch b with the broker's time ts (ms), as
// Kafka does for message.timestamp.type=LogAppendTime: the timestamp type
// bit and maxTimestamp, then the CRC.
func SetLogAppendTime(b []byte, ts int64) {
	attrs := binary.BigEndian.Uint16(b[AttrAt:]) | AttrLogAppendTime
	binary.BigEndian.PutUint16(b[AttrAt:], attrs)
	binary.BigEndian.PutUint64(b[MaxTimestampAt:], uint64(ts))
	SetCRC(b)
}

// SetProducer writes the producer fields of the one batch b (producer id,
// epoch, base sequence), then the CRC.
func SetProducer(b []byte, id int64, epoch int16, baseSequence int32) {
	binary.BigEndian.PutUint64(b[ProducerIDAt:], uint64(id))
	binary.BigEndian.PutUint16(b[ProducerEpochAt:], uint16(epoch))
	binary.BigEndian.PutUint32(b[BaseSequenceAt:], uint32(baseSequence))
	SetCRC(b)
}

// NewRecord is one record to be written into a batch.
type NewRecord struct {
	Key       []byte
	Value     []byte
	Headers   []kmsg.Header
	Timestamp int64 // ms since the epoch
}

// Build encodes records as one uncompressed RecordBatch v2 with base
// offset 0 (the log assigns the real one) and no producer id. Records are
// appended straight into the batch's one buffer, sized up front (kmsg's
// record encoder through a reused scratch buffer: the length prefix comes
// first), so a batch costs two allocations whatever its record count.
func Build(recs []NewRecord) []byte {
	first, last := recs[0].Timestamp, recs[0].Timestamp
	size := HeaderLen
	for _, r := range recs {
		first = min(first, r.Timestamp)
		last = max(last, r.Timestamp)
		size += len(r.Key) + len(r.Value) + 3*binary.MaxVarintLen64 + 2
		for _, h := range r.Headers {
			size += len(h.Key) + len(h.Value) + 2*binary.MaxVarintLen64
		}
	}
	out := make([]byte, HeaderLen, size)
	var scratch []byte
	for i, r := range recs {
		rec := kmsg.Record{
			TimestampDelta64: r.Timestamp - first,
			OffsetDelta:      int32(i),
			Key:              r.Key,
			Value:            r.Value,
			Headers:          r.Headers,
		}
		scratch = rec.AppendTo(scratch[:0])
		// AppendTo wrote a zero Length varint (1 byte); the real length is
		// everything after it.
		out = binary.AppendVarint(out, int64(len(scratch)-1))
		out = append(out, scratch[1:]...)
	}
	b := kmsg.RecordBatch{
		Length:          int32(len(out) - 12),
		Magic:           2,
		LastOffsetDelta: int32(len(recs) - 1),
		FirstTimestamp:  first,
		MaxTimestamp:    last,
		ProducerID:      -1,
		ProducerEpoch:   -1,
		FirstSequence:   -1,
		NumRecords:      int32(len(recs)),
	}
	// The header without records (kmsg writes a nil Records as nothing)
	// goes in front of the records already in place.
	b.AppendTo(out[:0])
	SetCRC(out)
	return out
}
