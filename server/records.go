package server

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Record batches are Kafka's RecordBatch v2 on disk and on the wire. This file
// builds them for records that arrive over HTTP and reads their headers for
// the producer table and replication; records are validated (on append) and
// decoded (for HTTP consumers) by package segments, the one record codec.
// Kafka clients get the stored bytes untouched.

const (
	batchHeaderLen    = 61 // bytes before the first record
	batchLenOffset    = 8  // int32 length of the rest of the batch
	batchCRCOffset    = 17 // CRC-32C covers everything from attributes on
	batchAttrsOffset  = 21
	codecMask         = 0x07
	controlBatchFlag  = 0x20
	transactionalFlag = 0x10
)

var (
	errCorruptBatch = errors.New("corrupt record batch")
	castagnoli      = crc32.MakeTable(crc32.Castagnoli)
)

// Record is one record with its position, as decoded from a batch.
type Record struct {
	Offset    int64
	Timestamp int64 // ms since the epoch
	Key       []byte
	Value     []byte
	Headers   []kmsg.Header
}

// newRecord is one record to be written into a batch.
type newRecord struct {
	Key       []byte
	Value     []byte
	Headers   []kmsg.Header
	Timestamp int64 // ms since the epoch
}

// buildBatch encodes records as one uncompressed RecordBatch v2 with base
// offset 0 (the log assigns the real one) and no producer id.
func buildBatch(recs []newRecord) []byte {
	first, last := recs[0].Timestamp, recs[0].Timestamp
	for _, r := range recs {
		first = min(first, r.Timestamp)
		last = max(last, r.Timestamp)
	}
	var body []byte
	for i, r := range recs {
		rec := kmsg.Record{
			TimestampDelta64: r.Timestamp - first,
			OffsetDelta:      int32(i),
			Key:              r.Key,
			Value:            r.Value,
			Headers:          r.Headers,
		}
		enc := rec.AppendTo(nil)
		// AppendTo wrote a zero Length varint (1 byte); the real length is
		// everything after it.
		body = binary.AppendVarint(body, int64(len(enc)-1))
		body = append(body, enc[1:]...)
	}
	b := kmsg.RecordBatch{
		Length:          int32(batchHeaderLen - 12 + len(body)),
		Magic:           2,
		LastOffsetDelta: int32(len(recs) - 1),
		FirstTimestamp:  first,
		MaxTimestamp:    last,
		ProducerID:      -1,
		ProducerEpoch:   -1,
		FirstSequence:   -1,
		NumRecords:      int32(len(recs)),
		Records:         body,
	}
	out := b.AppendTo(make([]byte, 0, batchHeaderLen+len(body)))
	binary.BigEndian.PutUint32(out[batchCRCOffset:], crc32.Checksum(out[batchAttrsOffset:], castagnoli))
	return out
}

// batchView is the header of one batch in a byte stream of concatenated batches.
type batchView struct {
	raw        []byte // the whole batch
	baseOffset int64
	attrs      int16
	lastDelta  int32
	firstTS    int64
	maxTS      int64
	producerID int64
	epoch      int16
	firstSeq   int32
	numRecords int32
}

func (b batchView) lastOffset() int64   { return b.baseOffset + int64(b.lastDelta) }
func (b batchView) isControl() bool     { return b.attrs&controlBatchFlag != 0 }
func (b batchView) codec() int16        { return b.attrs & codecMask }
func (b batchView) idempotent() bool    { return b.producerID >= 0 }
func (b batchView) records() []byte     { return b.raw[batchHeaderLen:] }
func (b batchView) lastSequence() int32 { return b.firstSeq + b.lastDelta }

// splitBatches walks concatenated batches, checking only their framing and
// CRC. A partial batch at the end (as a fetch response may carry) is dropped.
func splitBatches(data []byte, fn func(batchView) error) error {
	for len(data) >= batchHeaderLen {
		length := int64(int32(binary.BigEndian.Uint32(data[batchLenOffset:])))
		size := 12 + length
		if length < batchHeaderLen-12 {
			return fmt.Errorf("%w: length %d", errCorruptBatch, length)
		}
		if int64(len(data)) < size {
			return nil
		}
		raw := data[:size]
		if raw[16] != 2 {
			return fmt.Errorf("%w: magic %d", errCorruptBatch, raw[16])
		}
		if crc32.Checksum(raw[batchAttrsOffset:], castagnoli) != binary.BigEndian.Uint32(raw[batchCRCOffset:]) {
			return fmt.Errorf("%w: crc mismatch", errCorruptBatch)
		}
		v := batchView{
			raw:        raw,
			baseOffset: int64(binary.BigEndian.Uint64(raw[0:])),
			attrs:      int16(binary.BigEndian.Uint16(raw[21:])),
			lastDelta:  int32(binary.BigEndian.Uint32(raw[23:])),
			firstTS:    int64(binary.BigEndian.Uint64(raw[27:])),
			maxTS:      int64(binary.BigEndian.Uint64(raw[35:])),
			producerID: int64(binary.BigEndian.Uint64(raw[43:])),
			epoch:      int16(binary.BigEndian.Uint16(raw[51:])),
			firstSeq:   int32(binary.BigEndian.Uint32(raw[53:])),
			numRecords: int32(binary.BigEndian.Uint32(raw[57:])),
		}
		if err := fn(v); err != nil {
			return err
		}
		data = data[size:]
	}
	return nil
}

const timestampTypeFlag = 0x08

// setLogAppendTime stamps batches with the broker's time, as Kafka does for
// message.timestamp.type=LogAppendTime, and recomputes their CRCs.
func setLogAppendTime(views []batchView, ts int64) {
	for _, b := range views {
		attrs := binary.BigEndian.Uint16(b.raw[batchAttrsOffset:]) | timestampTypeFlag
		binary.BigEndian.PutUint16(b.raw[batchAttrsOffset:], attrs)
		binary.BigEndian.PutUint64(b.raw[35:], uint64(ts))
		binary.BigEndian.PutUint32(b.raw[batchCRCOffset:], crc32.Checksum(b.raw[batchAttrsOffset:], castagnoli))
	}
}
