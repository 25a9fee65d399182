package rest

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/runnel/runnel/api"
)

// recordsResource serves produce, consume and the SSE stream of a topic.
type recordsResource struct{ h *handler }

func (rr recordsResource) produce(w http.ResponseWriter, r *http.Request) {
	topic, err := topicParam(r)
	if err != nil {
		rr.h.problem(w, r, err)
		return
	}
	q := r.URL.Query()
	acks, err := parseAcks(q.Get("acks"))
	if err != nil {
		rr.h.problem(w, r, err)
		return
	}
	body, err := requestBody(r)
	if err != nil {
		rr.h.problem(w, r, fmt.Errorf("%w: reading the body: %v", api.ErrInvalidRequest, err))
		return
	}
	// Decoded records and the batches built from them hold about twice
	// the body again (readBody holds the body itself).
	if err := rr.h.mem.take(2*int64(len(body)), "decoding the records"); err != nil {
		rr.h.problem(w, r, err)
		return
	}
	defer rr.h.mem.give(2 * int64(len(body)))
	ctype := mediaType(r.Header.Get("Content-Type"))
	if ctype == api.MediaRecordBatch {
		rr.produceBatches(w, r, topic, body, acks)
		return
	}
	produce, done, err := rr.produceBackend(r, topic, encodingParam(q.Get("encoding")), body)
	if err != nil {
		rr.h.problem(w, r, err)
		return
	}
	defer done()
	var recs []api.ProduceRecord
	if ctype == api.MediaOctetStream {
		var rec api.ProduceRecord
		rec, err = decodeOctetRecord(r.Header, q, body)
		recs = []api.ProduceRecord{rec}
	} else {
		recs, err = api.DecodeProduce(r.Header.Get("Content-Type"), body, encodingParam(q.Get("encoding")), rr.h.opts.Limits.MaxProduceRecords)
	}
	if err != nil {
		rr.h.problem(w, r, err)
		return
	}
	offs, err := produce(r.Context(), recs, acks)
	if err != nil {
		rr.h.problem(w, r, err)
		return
	}
	var size int64
	for _, rec := range recs {
		size += api.RecordSize(rec.Key, rec.Value, rec.Headers)
	}
	rr.h.metrics.produced(topic, len(recs), size)
	if offs == nil {
		offs = []api.RecordOffset{}
	}
	rr.h.writeJSON(w, r, http.StatusOK, api.ProduceResponse{Offsets: offs})
}

func parseAcks(s string) (int, error) {
	switch s {
	case "", "all", "-1":
		return api.AcksAll, nil
	case "0":
		return api.AcksNone, nil
	case "1":
		return api.AcksLeader, nil
	}
	return 0, &api.FieldError{Field: "query.acks", Err: api.ErrInvalidRequest, Msg: "must be 0, 1 or all"}
}

func encodingParam(s string) string {
	if s == "" {
		return api.EncodingJSON
	}
	return s // the spec's enum was checked by validation
}

// parseOffset reads an offset query value: a number, earliest or latest.
func parseOffset(s string, def int64) (int64, error) {
	switch s {
	case "":
		return def, nil
	case "earliest":
		return api.OffsetEarliest, nil
	case "latest":
		return api.OffsetLatest, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, &api.FieldError{Field: "query.offset", Err: api.ErrInvalidRequest, Msg: "must be a non-negative integer, earliest or latest"}
	}
	return n, nil
}

// intParam reads an optional integer query parameter within [lo, hi].
func intParam(q map[string][]string, name string, def, lo, hi int64) (int64, error) {
	vs := q[name]
	if len(vs) == 0 || vs[0] == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(vs[0], 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, &api.FieldError{Field: "query." + name, Err: api.ErrInvalidRequest,
			Msg: fmt.Sprintf("must be an integer from %d to %d", lo, hi)}
	}
	return n, nil
}

// timestampParam reads the optional timestamp query parameter.
func timestampParam(q map[string][]string) (*int64, error) {
	if len(q["timestamp"]) == 0 {
		return nil, nil
	}
	ts, err := intParam(q, "timestamp", 0, 0, 1<<62)
	if err != nil {
		return nil, err
	}
	return &ts, nil
}

func (rr recordsResource) consume(w http.ResponseWriter, r *http.Request) {
	req, enc, err := rr.consumeRequest(r)
	if err != nil {
		rr.h.problem(w, r, err)
		return
	}
	if req.Wait > 0 {
		client := rr.h.opts.ClientAddr(r)
		if err := rr.h.longPolls.take(client); err != nil {
			rr.h.problem(w, r, err)
			return
		}
		defer rr.h.longPolls.release(client)
	}
	// The records read and their JSON take about consumeCost times
	// max_bytes; max_bytes shrinks to what the memory budget has free.
	held := rr.h.mem.takeUpTo(int64(req.MaxBytes)*consumeCost, min(int64(req.MaxBytes), consumeMinBytes)*consumeCost)
	if held == 0 {
		rr.h.problem(w, r, fmt.Errorf("%w: no memory left for a %d-byte read", api.ErrOverloaded, req.MaxBytes))
		return
	}
	defer rr.h.mem.give(held)
	req.MaxBytes = int(held / consumeCost)
	if wantsBatches(r) {
		rr.consumeBatches(w, r, req)
		return
	}
	if cs, ok := rr.h.b.(api.ConsumeStreamer); ok {
		rr.consumeEach(w, r, cs, req, enc)
		return
	}
	res, err := rr.h.b.Consume(r.Context(), req)
	if err != nil {
		rr.h.problem(w, r, err)
		return
	}
	var size int64
	for _, rec := range res.Records {
		size += api.RecordSize(rec.Key, rec.Value, rec.Headers)
	}
	rr.h.metrics.consumed(req.Topic, len(res.Records), size)
	rr.writeRecords(w, r, res, enc, size)
}

// consumeEach is consume for a ConsumeStreamer: each record is encoded
// into the output as the backend decodes it. The 200 goes out with the
// first record, so an error before it (a corrupt first batch: 422 with
// offset and next_offset) is still a problem answer; an error after it
// only ends the record list early, as Consume does.
func (rr recordsResource) consumeEach(w http.ResponseWriter, r *http.Request, cs api.ConsumeStreamer, req api.ConsumeRequest, enc string) {
	var rw *recordWriter
	var size int64
	n := 0
	res, err := cs.ConsumeEach(r.Context(), req, func(rec *api.ConsumedRecord) error {
		if rw == nil {
			// The read holds max_bytes of the budget; the buffer stays
			// within it.
			rw = rr.startRecords(w, r, int64(req.MaxBytes))
		}
		size += api.RecordSize(rec.Key, rec.Value, rec.Headers)
		n++
		return rw.write(rec, enc)
	})
	rr.h.metrics.consumed(req.Topic, n, size)
	if rw == nil {
		if err != nil {
			rr.h.problem(w, r, err)
			return
		}
		rw = rr.startRecords(w, r, 0)
	}
	rw.finish(res)
}

// recordWriter is a consume response being written: each record's JSON
// is appended straight to one output buffer (no per-record buffer, no
// second copy through a bufio.Writer), which goes out whenever it passes
// flushAt, so large answers leave in writes of about 256 KiB (fewer
// chunks and syscalls) and the response never exists whole in memory.
type recordWriter struct {
	out      io.Writer // the response, or its compressor
	buf      *[]byte   // the output buffer (pooled when large)
	pool     *outBufPool
	flushAt  int
	n        int
	err      error // the client left or stopped reading
	done     func()
	closeOut func() error
}

// startRecords sends the 200 and the start of a ConsumeResponse; size is
// about how many record bytes follow, sizing the output buffer.
func (rr recordsResource) startRecords(w http.ResponseWriter, r *http.Request, size int64) *recordWriter {
	done := rr.h.writeDeadline(w)
	w.Header().Set("Content-Type", "application/json")
	out, closeOut := compressResponse(w, r)
	w.WriteHeader(http.StatusOK)
	rw := &recordWriter{out: out, done: done, closeOut: closeOut, pool: &rr.h.outBufs}
	rw.flushAt, rw.buf = rw.pool.get(size)
	*rw.buf = append((*rw.buf)[:0], `{"records":[`...)
	return rw
}

func (rw *recordWriter) write(rec *api.ConsumedRecord, enc string) error {
	if rw.err != nil {
		return rw.err
	}
	b := *rw.buf
	if rw.n > 0 {
		b = append(b, ',')
	}
	rw.n++
	b = api.AppendConsumed(b, *rec, enc)
	*rw.buf = b
	if len(b) >= rw.flushAt {
		rw.flush()
	}
	return rw.err
}

// flush writes the buffered JSON out.
func (rw *recordWriter) flush() {
	if rw.err == nil && len(*rw.buf) > 0 {
		_, rw.err = rw.out.Write(*rw.buf)
	}
	*rw.buf = (*rw.buf)[:0]
}

func (rw *recordWriter) finish(res api.ConsumeResult) {
	if rw.err == nil {
		b := append(*rw.buf, `],"next_offset":`...)
		b = strconv.AppendInt(b, res.NextOffset, 10)
		b = append(b, `,"high_watermark":`...)
		b = strconv.AppendInt(b, res.HighWatermark, 10)
		b = append(b, `,"start_offset":`...)
		b = strconv.AppendInt(b, res.StartOffset, 10)
		*rw.buf = append(b, "}\n"...)
		rw.flush()
	}
	rw.closeOut()
	rw.done()
	rw.pool.put(rw.buf)
	rw.buf = nil
}

const (
	// consumeCost is what a consume holds per byte of max_bytes: the
	// records read (1x), the output buffer and the record being encoded.
	consumeCost = 2
	// consumeMinBytes is the smallest max_bytes a consume is shrunk to
	// before it is refused instead.
	consumeMinBytes = 64 << 10
	// outBufLarge is where a large answer's output buffer is written out
	// (one write of about this size); smaller answers flush at half their
	// size, at least outBufSmall, so the buffer stays within what the read
	// already holds of the memory budget.
	outBufLarge = 256 << 10
	outBufSmall = 32 << 10
)

// outBufPool recycles the output buffers of large answers: a
// 1,000-record read would otherwise allocate (and the GC clear) 256 KiB
// per request. Buffers a huge record grew past 4x are dropped, not kept.
// Safe for concurrent use; the zero value is ready.
type outBufPool struct{ p sync.Pool }

// get returns the flush threshold and an output buffer for an answer of
// about size record bytes.
func (op *outBufPool) get(size int64) (int, *[]byte) {
	flushAt := int(min(max(size/2, outBufSmall), outBufLarge))
	if flushAt == outBufLarge {
		if b, ok := op.p.Get().(*[]byte); ok {
			return flushAt, b
		}
	}
	b := make([]byte, 0, flushAt+flushAt/4)
	return flushAt, &b
}

func (op *outBufPool) put(b *[]byte) {
	if c := cap(*b); c >= outBufLarge && c <= 4*outBufLarge {
		*b = (*b)[:0]
		op.p.Put(b)
	}
}

// writeRecords writes a ConsumeResponse one record at a time (see
// recordWriter), for backends that return the records as a slice. A
// client that does not read within WriteTimeout is dropped.
func (rr recordsResource) writeRecords(w http.ResponseWriter, r *http.Request, res api.ConsumeResult, enc string, size int64) {
	rw := rr.startRecords(w, r, size)
	for i := range res.Records {
		if rw.write(&res.Records[i], enc) != nil {
			break // the client left or stopped reading
		}
	}
	rw.finish(res)
}

func (rr recordsResource) consumeRequest(r *http.Request) (api.ConsumeRequest, string, error) {
	var req api.ConsumeRequest
	var err error
	if req.Topic, err = topicParam(r); err != nil {
		return req, "", err
	}
	p, err := strconv.ParseInt(chi.URLParam(r, "partition"), 10, 32)
	if err != nil || p < 0 {
		return req, "", &api.FieldError{Field: "path.partition", Err: api.ErrInvalidRequest, Msg: "must be an integer from 0"}
	}
	req.Partition = int32(p)
	q := r.URL.Query()
	if req.Offset, err = parseOffset(q.Get("offset"), api.OffsetEarliest); err != nil {
		return req, "", err
	}
	if req.Timestamp, err = timestampParam(q); err != nil {
		return req, "", err
	}
	maxRecords, err := intParam(q, "max_records", 100, 1, 10000)
	if err != nil {
		return req, "", err
	}
	maxBytes, err := intParam(q, "max_bytes", 1<<20, 1, 64<<20)
	if err != nil {
		return req, "", err
	}
	waitMS, err := intParam(q, "wait_ms", 0, 0, 60000)
	if err != nil {
		return req, "", err
	}
	req.MaxRecords, req.MaxBytes = int(maxRecords), int(maxBytes)
	req.Wait = min(time.Duration(waitMS)*time.Millisecond, rr.h.opts.MaxWait)
	if req.ReadUncommitted, err = isolationParam(q); err != nil {
		return req, "", err
	}
	if req.IncludeControl, err = controlParam(q, req.ReadUncommitted); err != nil {
		return req, "", err
	}
	return req, encodingParam(q.Get("encoding")), nil
}

// controlParam reads include_control (default false): transaction markers
// as records. Only a read_uncommitted reader may ask: a read_committed
// one never sees them, as a Kafka consumer never does.
func controlParam(q map[string][]string, uncommitted bool) (bool, error) {
	v := q["include_control"]
	if len(v) == 0 || v[0] == "false" {
		return false, nil
	}
	if v[0] != "true" {
		return false, &api.FieldError{Field: "query.include_control", Err: api.ErrInvalidRequest, Msg: "must be true or false"}
	}
	if !uncommitted {
		return false, &api.FieldError{Field: "query.include_control", Err: api.ErrInvalidRequest, Msg: "needs isolation=read_uncommitted (read_committed readers never see transaction markers)"}
	}
	return true, nil
}

// isolationParam reads isolation: read_committed (the default) or
// read_uncommitted, which it reports.
func isolationParam(q map[string][]string) (bool, error) {
	switch v := q["isolation"]; {
	case len(v) == 0 || v[0] == "read_committed":
		return false, nil
	case v[0] == "read_uncommitted":
		return true, nil
	}
	return false, &api.FieldError{Field: "query.isolation", Err: api.ErrInvalidRequest, Msg: "must be read_committed or read_uncommitted"}
}
