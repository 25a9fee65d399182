package rest

import (
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/runnel/runnel/api"
)

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
			case api.MediaRecordBatch:
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
func decodeOctetRecord(h http.Header, q url.Values, body []byte) (api.ProduceRecord, error) {
	rec := api.ProduceRecord{Value: body}
	if rec.Value == nil {
		rec.Value = []byte{}
	}
	if vs := h.Values(api.HeaderKey); len(vs) > 0 {
		k, err := url.PathUnescape(vs[0])
		if err != nil || len(vs) > 1 {
			return rec, &api.FieldError{Field: "header." + api.HeaderKey, Err: api.ErrInvalidRequest, Msg: "one percent-encoded key"}
		}
		rec.Key = []byte(k)
	}
	for _, v := range h.Values(api.HeaderHeader) {
		for _, part := range strings.Split(v, ",") {
			hd, err := parseHeaderField(strings.TrimSpace(part))
			if err != nil {
				return rec, &api.FieldError{Field: "header." + api.HeaderHeader, Err: api.ErrInvalidRequest, Msg: err.Error()}
			}
			rec.Headers = append(rec.Headers, hd)
		}
	}
	if v := h.Get(api.HeaderTimestamp); v != "" {
		ms, ok := api.ParseNonNegative([]byte(v), 1<<63-1)
		if !ok {
			return rec, &api.FieldError{Field: "header." + api.HeaderTimestamp, Err: api.ErrInvalidRequest, Msg: "must be a non-negative integer (ms since the epoch)"}
		}
		ts := time.UnixMilli(ms)
		rec.Timestamp = &ts
	}
	if v := q.Get("partition"); v != "" {
		p, err := strconv.ParseInt(v, 10, 32)
		if err != nil || p < 0 {
			return rec, &api.FieldError{Field: "query.partition", Err: api.ErrInvalidRequest, Msg: "must be an integer from 0 to 2147483647"}
		}
		p32 := int32(p)
		rec.Partition = &p32
	}
	return rec, nil
}

// parseHeaderField reads one "name=value" (percent-encoded; a name alone
// is a null value).
func parseHeaderField(s string) (api.Header, error) {
	name, value, hasValue := strings.Cut(s, "=")
	n, err := url.PathUnescape(name)
	if err != nil {
		return api.Header{}, fmt.Errorf("header name %q: %v", name, err)
	}
	hd := api.Header{Key: n}
	if hasValue {
		v, err := url.PathUnescape(value)
		if err != nil {
			return api.Header{}, fmt.Errorf("header %q value: %v", n, err)
		}
		hd.Value = []byte(v)
	}
	return hd, nil
}

// produceBatches serves a MediaRecordBatch produce.
func (rr recordsResource) produceBatches(w http.ResponseWriter, r *http.Request, topic string, body []byte, acks int) {
	bb, ok := rr.h.b.(api.BatchBackend)
	if !ok {
		rr.h.problem(w, r, fmt.Errorf("%w: this node does not take record batches", api.ErrNotImplemented))
		return
	}
	if r.Header.Get(api.IdempotencyKeyHeader) != "" {
		// A batch is made idempotent the Kafka way (producer id and
		// sequence), which HTTP does not hand out.
		rr.h.problem(w, r, &api.FieldError{Field: "header." + api.IdempotencyKeyHeader, Err: api.ErrInvalidRequest,
			Msg: "applies to JSON, NDJSON and octet-stream bodies, not to record batches"})
		return
	}
	q := r.URL.Query()
	p, err := strconv.ParseInt(q.Get("partition"), 10, 32)
	if err != nil || p < 0 {
		rr.h.problem(w, r, &api.FieldError{Field: "query.partition", Err: api.ErrInvalidRequest,
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
func (rr recordsResource) consumeBatches(w http.ResponseWriter, r *http.Request, req api.ConsumeRequest) {
	bb, ok := rr.h.b.(api.BatchBackend)
	if !ok {
		rr.h.problem(w, r, fmt.Errorf("%w: this node does not serve record batches", api.ErrNotImplemented))
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
	hd.Set("Content-Type", api.MediaRecordBatch)
	hd.Set("Content-Length", strconv.Itoa(len(res.Batches)))
	hd.Set(api.HeaderNextOffset, strconv.FormatInt(res.NextOffset, 10))
	hd.Set(api.HeaderHighWatermark, strconv.FormatInt(res.HighWatermark, 10))
	hd.Set(api.HeaderStartOffset, strconv.FormatInt(res.StartOffset, 10))
	out, closeOut := compressResponse(w, r)
	w.WriteHeader(http.StatusOK)
	_, _ = out.Write(res.Batches)
	_ = closeOut()
}
