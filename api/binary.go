package api

import (
	"context"
)

// Binary media types of produce and consume, for clients that do not need
// JSON (curl --data-binary @file, or a Kafka client library's encoder):
//
//   - MediaOctetStream: one record per request, the body is its value; key,
//     headers and timestamp travel in HTTP headers (HeaderKey, HeaderHeader,
//     HeaderTimestamp), percent-encoded so any bytes fit.
//   - MediaRecordBatch: Kafka's RecordBatch v2 itself, one or more batches
//     back to back, for one partition. It is what runnel stores and what a
//     Kafka Fetch returns, so a produce needs no re-encoding (the server
//     still checks every batch as it checks a Kafka produce: framing, CRC,
//     records, max.message.bytes; it is never trusted), a consume answers
//     the stored batches as they are, and a client reuses any Kafka
//     library's encoder and decoder (compression included) instead of a
//     new format. A length-prefixed record format would have needed a
//     third codec on both sides for no gain.
const (
	MediaOctetStream = "application/octet-stream"
	MediaRecordBatch = "application/vnd.kafka.recordbatch"

	HeaderKey       = "Runnel-Key"       // the record key, percent-encoded; absent: null
	HeaderHeader    = "Runnel-Header"    // name=value, percent-encoded, repeatable, in order
	HeaderTimestamp = "Runnel-Timestamp" // ms since the epoch; absent: the append time

	HeaderNextOffset    = "Runnel-Next-Offset"
	HeaderHighWatermark = "Runnel-High-Watermark"
	HeaderStartOffset   = "Runnel-Start-Offset"
)

// BatchBackend is optionally implemented by a Backend that appends and
// reads RecordBatch v2 bytes as they are (MediaRecordBatch). Safe for
// concurrent use; errors as Backend's.
type BatchBackend interface {
	// ProduceBatches appends one or more concatenated batches to one
	// partition atomically, after checking each as a Kafka produce is
	// checked, and refuses bodies of more than maxRecords records
	// (ErrTooManyRecords) or batches with a producer id or transaction
	// (ErrInvalidRequest). It returns the first record's offset (-1 with
	// acks 0) and the record count.
	ProduceBatches(ctx context.Context, topic string, partition int32, batches []byte, acks, maxRecords int) (base int64, records int, err error)
	// ConsumeBatches reads whole stored batches from req's position below
	// the high watermark, at most req.MaxBytes (at least one batch when
	// there is one), waiting up to req.Wait when there is none. The first
	// batch may begin before the offset asked for; clients skip those
	// records as Kafka clients do. MaxRecords is not applied (batches are
	// not split). A stored batch that fails its checks is a
	// *CorruptBatchError, as for Consume.
	ConsumeBatches(ctx context.Context, req ConsumeRequest) (BatchResult, error)
}

// BatchResult is what ConsumeBatches read.
type BatchResult struct {
	Batches       []byte
	Records       int // records in Batches at or after the offset asked for
	NextOffset    int64
	HighWatermark int64
	StartOffset   int64
}
