package server

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Record batches are Kafka's RecordBatch v2 on disk and on the wire. This file
// builds them for records that arrive over HTTP and decodes them for HTTP
// consumers; Kafka clients get the stored bytes untouched.

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
	errCorruptBatch      = errors.New("corrupt record batch")
	errDecompressedLimit = errors.New("decompressed batch exceeds the limit")
	castagnoli           = crc32.MakeTable(crc32.Castagnoli)
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

// decodeRecords appends the records of one batch to dst, decompressing with
// at most limit bytes of output.
func decodeRecords(dst []Record, b batchView, limit int) ([]Record, error) {
	body, err := decompress(b.codec(), b.records(), limit)
	if err != nil {
		return dst, err
	}
	for i := int32(0); i < b.numRecords; i++ {
		l, n := binary.Varint(body)
		if n <= 0 || l < 0 || int64(len(body)-n) < l {
			return dst, fmt.Errorf("%w: record %d framing", errCorruptBatch, i)
		}
		var rec kmsg.Record
		if err := rec.ReadFrom(body[:n+int(l)]); err != nil {
			return dst, fmt.Errorf("%w: record %d: %v", errCorruptBatch, i, err)
		}
		body = body[n+int(l):]
		dst = append(dst, Record{
			Offset:    b.baseOffset + int64(rec.OffsetDelta),
			Timestamp: b.firstTS + rec.TimestampDelta64,
			Key:       rec.Key,
			Value:     rec.Value,
			Headers:   rec.Headers,
		})
	}
	return dst, nil
}

var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

func decompress(codec int16, src []byte, limit int) ([]byte, error) {
	switch codec {
	case 0:
		return src, nil
	case 1:
		zr, err := gzip.NewReader(bytes.NewReader(src))
		if err != nil {
			return nil, fmt.Errorf("%w: gzip: %v", errCorruptBatch, err)
		}
		return readLimited(zr, limit)
	case 2:
		return unsnappy(src, limit)
	case 3:
		return readLimited(lz4.NewReader(bytes.NewReader(src)), limit)
	case 4:
		zr, err := zstd.NewReader(bytes.NewReader(src), zstd.WithDecoderMaxMemory(uint64(limit)))
		if err != nil {
			return nil, fmt.Errorf("%w: zstd: %v", errCorruptBatch, err)
		}
		defer zr.Close()
		return readLimited(zr, limit)
	}
	return nil, fmt.Errorf("%w: unknown compression codec %d", errCorruptBatch, codec)
}

// unsnappy decodes raw snappy blocks and the xerial framing Java clients use.
func unsnappy(src []byte, limit int) ([]byte, error) {
	if !bytes.HasPrefix(src, xerialMagic) {
		return snappyBlock(nil, src, limit)
	}
	if len(src) < 16 {
		return nil, fmt.Errorf("%w: short xerial snappy header", errCorruptBatch)
	}
	src = src[16:]
	var out []byte
	for len(src) > 0 {
		if len(src) < 4 {
			return nil, fmt.Errorf("%w: xerial chunk length", errCorruptBatch)
		}
		n := int(binary.BigEndian.Uint32(src))
		src = src[4:]
		if n < 0 || n > len(src) {
			return nil, fmt.Errorf("%w: xerial chunk of %d bytes", errCorruptBatch, n)
		}
		var err error
		if out, err = snappyBlock(out, src[:n], limit-len(out)); err != nil {
			return nil, err
		}
		src = src[n:]
	}
	return out, nil
}

func snappyBlock(dst, block []byte, limit int) ([]byte, error) {
	n, err := snappy.DecodedLen(block)
	if err != nil {
		return nil, fmt.Errorf("%w: snappy: %v", errCorruptBatch, err)
	}
	if n > limit {
		return nil, errDecompressedLimit
	}
	out, err := s2.Decode(make([]byte, n), block)
	if err != nil {
		return nil, fmt.Errorf("%w: snappy: %v", errCorruptBatch, err)
	}
	return append(dst, out...), nil
}

func readLimited(r io.Reader, limit int) ([]byte, error) {
	out, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("%w: decompress: %v", errCorruptBatch, err)
	}
	if len(out) > limit {
		return nil, errDecompressedLimit
	}
	return out, nil
}

// checkRecords validates a batch before it is stored. The CRC (checked by
// splitBatches) already covers the record bytes as the producer sent them;
// here the header must agree with itself, the codec must be one we can read
// back, and an uncompressed body must frame exactly numRecords records.
// Compressed bodies are not inflated on the produce path: the producer's CRC
// covers them, and inflating every batch cost half of the Kafka produce CPU
// in profiles. Consumers that need records decoded (HTTP) inflate with a limit.
func checkRecords(b batchView) error {
	if b.numRecords < 0 || b.numRecords != b.lastDelta+1 && !b.isControl() {
		return fmt.Errorf("%w: %d records but last offset delta %d", errCorruptBatch, b.numRecords, b.lastDelta)
	}
	if b.codec() > 4 {
		return fmt.Errorf("%w: unknown compression codec %d", errCorruptBatch, b.codec())
	}
	if b.codec() != 0 {
		return nil
	}
	body := b.records()
	for i := int32(0); i < b.numRecords; i++ {
		l, n := binary.Varint(body)
		if n <= 0 || l < 0 || int64(len(body)-n) < l {
			return fmt.Errorf("%w: record %d framing", errCorruptBatch, i)
		}
		body = body[n+int(l):]
	}
	if len(body) != 0 {
		return fmt.Errorf("%w: %d bytes after the last record", errCorruptBatch, len(body))
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
