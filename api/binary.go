package api

import (
	"context"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
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

// mediaType is the media type of a Content-Type or Accept entry, lowercased.
func mediaType(v string) string {
	mt, _, err := mime.ParseMediaType(v)
	if err != nil {
		return ""
	}
	return mt
}

// wantsBatches: the consume asks for MediaRecordBatch (listed in Accept
// before any JSON type).
func wantsBatches(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		for _, part := range strings.Split(v, ",") {
			switch mediaType(strings.TrimSpace(part)) {
			case MediaRecordBatch:
				return true
			case "application/json", "*/*", "application/*":
				return false
			}
		}
	}
	return false
}

// decodeOctetRecord makes the one record of an application/octet-stream
// produce: the body is the value (aliased: it lives as long as the
// request), the rest comes from the HTTP headers and the partition query.
func decodeOctetRecord(h http.Header, q url.Values, body []byte) (ProduceRecord, error) {
	rec := ProduceRecord{Value: body}
	if rec.Value == nil {
		rec.Value = []byte{}
	}
	if vs := h.Values(HeaderKey); len(vs) > 0 {
		k, err := url.PathUnescape(vs[0])
		if err != nil || len(vs) > 1 {
			return rec, &FieldError{Field: "header." + HeaderKey, Err: ErrInvalidRequest, Msg: "one percent-encoded key"}
		}
		rec.Key = []byte(k)
	}
	for _, v := range h.Values(HeaderHeader) {
		for _, part := range strings.Split(v, ",") {
			hd, err := parseHeaderField(strings.TrimSpace(part))
			if err != nil {
				return rec, &FieldError{Field: "header." + HeaderHeader, Err: ErrInvalidRequest, Msg: err.Error()}
			}
			rec.Headers = append(rec.Headers, hd)
		}
	}
	if v := h.Get(HeaderTimestamp); v != "" {
		ms, ok := parseNonNegative([]byte(v), 1<<63-1)
		if !ok {
			return rec, &FieldError{Field: "header." + HeaderTimestamp, Err: ErrInvalidRequest, Msg: "must be a non-negative integer (ms since the epoch)"}
		}
		ts := time.UnixMilli(ms)
		rec.Timestamp = &ts
	}
	if v := q.Get("partition"); v != "" {
		p, err := strconv.ParseInt(v, 10, 32)
		if err != nil || p < 0 {
			return rec, &FieldError{Field: "query.partition", Err: ErrInvalidRequest, Msg: "must be an integer from 0 to 2147483647"}
		}
		p32 := int32(p)
		rec.Partition = &p32
	}
	return rec, nil
}

// parseHeaderField reads one "name=value" (percent-encoded; a name alone
// is a null value).
func parseHeaderField(s string) (Header, error) {
	name, value, hasValue := strings.Cut(s, "=")
	n, err := url.PathUnescape(name)
	if err != nil {
		return Header{}, fmt.Errorf("header name %q: %v", name, err)
	}
	hd := Header{Key: n}
	if hasValue {
		v, err := url.PathUnescape(value)
		if err != nil {
			return Header{}, fmt.Errorf("header %q value: %v", n, err)
		}
		hd.Value = []byte(v)
	}
	return hd, nil
}

// produceBatches serves a MediaRecordBatch produce.
func (rr recordsResource) produceBatches(w http.ResponseWriter, r *http.Request, topic string, body []byte, acks int) {
	bb, ok := rr.h.b.(BatchBackend)
	if !ok {
		rr.h.problem(w, r, fmt.Errorf("%w: this node does not take record batches", ErrNotImplemented))
		return
	}
	if r.Header.Get(IdempotencyKeyHeader) != "" {
		// A batch is made idempotent the Kafka way (producer id and
		// sequence), which HTTP does not hand out.
		rr.h.problem(w, r, &FieldError{Field: "header." + IdempotencyKeyHeader, Err: ErrInvalidRequest,
			Msg: "applies to JSON, NDJSON and octet-stream bodies, not to record batches"})
		return
	}
	q := r.URL.Query()
	p, err := strconv.ParseInt(q.Get("partition"), 10, 32)
	if err != nil || p < 0 {
		rr.h.problem(w, r, &FieldError{Field: "query.partition", Err: ErrInvalidRequest,
			Msg: "a record batch body needs the partition it goes to (0 to 2147483647)"})
		return
	}
	base, n, err := bb.ProduceBatches(r.Context(), topic, int32(p), body, acks, rr.h.opts.Limits.MaxProduceRecords)
	if err != nil {
		rr.h.problem(w, r, err)
		return
	}
	rr.h.metrics.produced(topic, n, int64(len(body)))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	buf := make([]byte, 0, 16+n*32)
	buf = append(buf, `{"offsets":[`...)
	for i := range n {
		if i > 0 {
			buf = append(buf, ',')
		}
		off := base + int64(i)
		if base < 0 {
			off = -1
		}
		buf = append(buf, `{"partition":`...)
		buf = strconv.AppendInt(buf, p, 10)
		buf = append(buf, `,"offset":`...)
		buf = strconv.AppendInt(buf, off, 10)
		buf = append(buf, '}')
	}
	buf = append(buf, "]}\n"...)
	_, _ = w.Write(buf)
}

// consumeBatches serves a consume that asked for MediaRecordBatch: the
// stored batches as they are, the offsets in response headers.
func (rr recordsResource) consumeBatches(w http.ResponseWriter, r *http.Request, req ConsumeRequest) {
	bb, ok := rr.h.b.(BatchBackend)
	if !ok {
		rr.h.problem(w, r, fmt.Errorf("%w: this node does not serve record batches", ErrNotImplemented))
		return
	}
	res, err := bb.ConsumeBatches(r.Context(), req)
	if err != nil {
		rr.h.problem(w, r, err)
		return
	}
	rr.h.metrics.consumed(req.Topic, res.Records, int64(len(res.Batches)))
	defer rr.h.writeDeadline(w)()
	hd := w.Header()
	hd.Set("Content-Type", MediaRecordBatch)
	hd.Set("Content-Length", strconv.Itoa(len(res.Batches)))
	hd.Set(HeaderNextOffset, strconv.FormatInt(res.NextOffset, 10))
	hd.Set(HeaderHighWatermark, strconv.FormatInt(res.HighWatermark, 10))
	hd.Set(HeaderStartOffset, strconv.FormatInt(res.StartOffset, 10))
	out, closeOut := compressResponse(w, r)
	w.WriteHeader(http.StatusOK)
	_, _ = out.Write(res.Batches)
	_ = closeOut()
}
