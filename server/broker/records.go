package broker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/segments"
)

// Record batches are Kafka's RecordBatch v2 on disk and on the wire. This file
// builds them for records that arrive over HTTP and views their headers for
// the producer table and replication; headers are checked (NextBatch),
// records validated (on append) and decoded (for HTTP consumers) by package
// segments, the one RecordBatch codec. Kafka clients get the stored bytes
// untouched.

const (
	BatchHeaderLen    = 61 // bytes before the first record
	batchCRCOffset    = 17 // CRC-32C covers everything from attributes on
	batchAttrsOffset  = 21
	codecMask         = 0x07
	controlBatchFlag  = 0x20
	TransactionalFlag = 0x10
)

var (
	ErrCorruptBatch = errors.New("corrupt record batch")
	castagnoli      = crc32.MakeTable(crc32.Castagnoli)
)

// Record is one record with its position, as decoded from a batch.
type Record struct {
	Offset    int64
	Timestamp int64 // ms since the epoch
	Key       []byte
	Value     []byte
	Headers   []kmsg.Header
	// Transactional: the record's batch belongs to a transaction (the
	// HTTP consume and the UI mark it).
	Transactional bool
	// Control is set when the record is a transaction marker (HTTP reads
	// that ask for markers); Key, Value and Headers are then nil.
	Control *segments.Marker
}

// NewRecord is one record to be written into a batch.
type NewRecord struct {
	Key       []byte
	Value     []byte
	Headers   []kmsg.Header
	Timestamp int64 // ms since the epoch
}

// BuildBatch encodes records as one uncompressed RecordBatch v2 with base
// offset 0 (the log assigns the real one) and no producer id. Records are
// appended straight into the batch's one buffer, sized up front (kmsg's
// record encoder through a reused scratch buffer: the length prefix comes
// first), so a batch costs two allocations whatever its record count.
func BuildBatch(recs []NewRecord) []byte {
	first, last := recs[0].Timestamp, recs[0].Timestamp
	size := BatchHeaderLen
	for _, r := range recs {
		first = min(first, r.Timestamp)
		last = max(last, r.Timestamp)
		size += len(r.Key) + len(r.Value) + 3*binary.MaxVarintLen64 + 2
		for _, h := range r.Headers {
			size += len(h.Key) + len(h.Value) + 2*binary.MaxVarintLen64
		}
	}
	out := make([]byte, BatchHeaderLen, size)
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
	binary.BigEndian.PutUint32(out[batchCRCOffset:], crc32.Checksum(out[batchAttrsOffset:], castagnoli))
	return out
}

// BatchView is the header of one batch in a byte stream of concatenated batches.
type BatchView struct {
	Raw        []byte // the whole batch
	baseOffset int64
	Attrs      int16
	lastDelta  int32
	firstTS    int64
	maxTS      int64
	ProducerID int64
	epoch      int16
	firstSeq   int32
	NumRecords int32
}

func (b BatchView) lastOffset() int64   { return b.baseOffset + int64(b.lastDelta) }
func (b BatchView) IsControl() bool     { return b.Attrs&controlBatchFlag != 0 }
func (b BatchView) Idempotent() bool    { return b.ProducerID >= 0 && !isKeyProducerID(b.ProducerID) }
func (b BatchView) records() []byte     { return b.Raw[BatchHeaderLen:] }
func (b BatchView) lastSequence() int32 { return b.firstSeq + b.lastDelta }

// SplitBatches walks concatenated batches, checking their framing, CRC and
// header counts (segments.NextBatch). A partial batch at the end (as a fetch
// response may carry) is dropped.
func SplitBatches(data []byte, fn func(BatchView) error) error {
	for {
		info, ok, err := segments.NextBatch(data)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrCorruptBatch, err)
		}
		if !ok {
			return nil
		}
		v := BatchView{Raw: data[:info.Size], baseOffset: info.BaseOffset, Attrs: info.Attributes,
			lastDelta: int32(info.LastOffset - info.BaseOffset), firstTS: info.FirstTimestamp, maxTS: info.MaxTimestamp,
			ProducerID: info.ProducerID, epoch: info.ProducerEpoch, firstSeq: info.BaseSequence, NumRecords: info.NumRecords}
		if err := fn(v); err != nil {
			return err
		}
		data = data[info.Size:]
	}
}

const timestampTypeFlag = 0x08

// setLogAppendTime stamps batches with the broker's time, as Kafka does for
// message.timestamp.type=LogAppendTime, and recomputes their CRCs.
func setLogAppendTime(views []BatchView, ts int64) {
	for _, b := range views {
		attrs := binary.BigEndian.Uint16(b.Raw[batchAttrsOffset:]) | timestampTypeFlag
		binary.BigEndian.PutUint16(b.Raw[batchAttrsOffset:], attrs)
		binary.BigEndian.PutUint64(b.Raw[35:], uint64(ts))
		binary.BigEndian.PutUint32(b.Raw[batchCRCOffset:], crc32.Checksum(b.Raw[batchAttrsOffset:], castagnoli))
	}
}
