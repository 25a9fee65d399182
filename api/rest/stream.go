package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/runnel/runnel/api"
)

// The SSE live tail (GET /v1/topics/{topic}/records/stream).
//
// One goroutine per streamed partition long-polls Backend.Consume and hands
// batches to the request goroutine, which alone writes to the client. The
// readers are owned by the request: a context cancelled when the handler
// returns stops them and the handler waits for them before returning.
//
// Event ids are "p:o[,p:o...]", one pair per streamed partition, the event's
// own partition first: o is the last offset delivered on that partition (so a
// resume starts at o+1). Start positions are resolved before the first event,
// so every id names every partition and a reconnect loses nothing even when
// the stream started at "latest".

const (
	streamBatchRecords = 500
	streamBatchBytes   = 1 << 20
	streamPollWait     = 10 * time.Second
	// streamReadTokens is how many batches one stream holds at once (read
	// or waiting for the writer), however many partitions it streams: a
	// stream of 200 partitions whose client does not read holds a few MiB,
	// not a batch per partition. The stream takes twice that from the
	// memory budget for its life (a batch may overshoot by one record).
	streamReadTokens = 4
)

// streamBatch is what a partition reader hands to the writer.
type streamBatch struct {
	partition int32
	records   []api.ConsumedRecord
	next      int64
	err       error
}

// streamPlan is a parsed stream request.
type streamPlan struct {
	topic      string
	partitions []int32
	start      map[int32]api.ConsumeRequest
	enc        string
}

func (rr recordsResource) streamPlan(r *http.Request) (streamPlan, error) {
	var sp streamPlan
	var err error
	if sp.topic, err = topicParam(r); err != nil {
		return sp, err
	}
	q := r.URL.Query()
	sp.enc = encodingParam(q.Get("encoding"))
	offset, err := parseOffset(q.Get("offset"), api.OffsetLatest)
	if err != nil {
		return sp, err
	}
	ts, err := timestampParam(q)
	if err != nil {
		return sp, err
	}
	uncommitted, err := isolationParam(q)
	if err != nil {
		return sp, err
	}
	control, err := controlParam(q, uncommitted)
	if err != nil {
		return sp, err
	}
	resume := map[int32]int64{}
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		if resume, err = api.ParseEventID(id); err != nil {
			return sp, err
		}
	}
	if sp.partitions, err = rr.streamPartitions(r.Context(), sp.topic, q.Get("partitions")); err != nil {
		return sp, err
	}
	sp.start = make(map[int32]api.ConsumeRequest, len(sp.partitions))
	for _, p := range sp.partitions {
		req := api.ConsumeRequest{Topic: sp.topic, Partition: p, Offset: offset, Timestamp: ts,
			MaxRecords: streamBatchRecords, MaxBytes: streamBatchBytes, ReadUncommitted: uncommitted, IncludeControl: control}
		if last, ok := resume[p]; ok {
			req.Offset, req.Timestamp = last+1, nil
		}
		sp.start[p] = req
	}
	return sp, nil
}

// streamPartitions is the partitions query (default: all), checked against the topic.
func (rr recordsResource) streamPartitions(ctx context.Context, topic, list string) ([]int32, error) {
	td, err := rr.h.b.DescribeTopic(ctx, topic)
	if err != nil {
		return nil, err
	}
	var all []int32
	for _, p := range td.Partitions {
		all = append(all, p.Partition)
	}
	if list == "" {
		return all, nil
	}
	var out []int32
	for _, s := range strings.Split(list, ",") {
		p, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			return nil, &api.FieldError{Field: "query.partitions", Err: api.ErrInvalidRequest, Msg: "must be partition numbers separated by commas"}
		}
		if !slices.Contains(all, int32(p)) {
			return nil, &api.FieldError{Field: "query.partitions", Err: api.ErrUnknownPartition, Msg: fmt.Sprintf("topic %q has no partition %d", topic, p)}
		}
		if !slices.Contains(out, int32(p)) {
			out = append(out, int32(p))
		}
	}
	return out, nil
}

func (rr recordsResource) stream(w http.ResponseWriter, r *http.Request) {
	client := rr.h.opts.ClientAddr(r)
	if err := rr.h.streams.take(client); err != nil {
		rr.h.problem(w, r, err)
		return
	}
	defer rr.h.streams.release(client)
	sp, err := rr.streamPlan(r)
	if err != nil {
		rr.h.problem(w, r, err)
		return
	}
	hold := int64(2 * streamReadTokens * streamBatchBytes)
	if err := rr.h.mem.take(hold, "the stream's read-ahead"); err != nil {
		rr.h.problem(w, r, err)
		return
	}
	defer rr.h.mem.give(hold)
	// Resolve every start position before the first byte, so errors are
	// still proper problems and ids complete. One record per partition
	// says where it starts; the readers read the records themselves, so
	// nothing is held for partitions the writer has not reached.
	last := make(map[int32]int64, len(sp.partitions))
	starts := make(map[int32]int64, len(sp.partitions))
	for _, p := range sp.partitions {
		probe := sp.start[p]
		probe.MaxRecords, probe.MaxBytes = 1, 1
		res, err := rr.h.b.Consume(r.Context(), probe)
		if err != nil {
			rr.h.problem(w, r, err)
			return
		}
		start := res.NextOffset // nothing read: the resolved start
		if len(res.Records) > 0 {
			start = res.Records[0].Offset
		}
		starts[p], last[p] = start, start-1
	}
	ctx, cancel := context.WithCancel(r.Context())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	tokens := make(chan struct{}, streamReadTokens)
	batches := make(chan streamBatch, streamReadTokens)
	for _, p := range sp.partitions {
		req := sp.start[p]
		req.Offset, req.Timestamp, req.Wait = starts[p], nil, min(streamPollWait, rr.h.opts.MaxWait)
		wg.Add(1)
		go func() {
			defer wg.Done()
			rr.readPartition(ctx, req, tokens, batches)
		}()
	}
	sw := &sseWriter{w: w, rc: http.NewResponseController(w), timeout: rr.h.opts.Limits.WriteTimeout, now: rr.h.opts.Now}
	sw.open()
	defer func() { _ = sw.rc.SetWriteDeadline(time.Time{}) }() // no later request inherits it
	heartbeat := time.NewTicker(rr.h.opts.Heartbeat)
	defer heartbeat.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-heartbeat.C:
			if !sw.comment("heartbeat") {
				return
			}
		case b := <-batches:
			ok := rr.writeBatch(sw, sp, b, last)
			<-tokens // its records are written (or the stream is over)
			if !ok {
				return
			}
		}
	}
}

// readPartition reads one partition until ctx is done or an error, which it
// hands on as the last batch. It holds one of the stream's read tokens from
// before a read until the writer has written the batch, so a stream holds
// at most streamReadTokens batches however many partitions it has; a
// caught-up partition waits for records with a one-record long poll that
// holds no token (and nothing once it returns).
func (rr recordsResource) readPartition(ctx context.Context, req api.ConsumeRequest, tokens chan struct{}, out chan<- streamBatch) {
	wait := req.Wait
	for {
		select {
		case tokens <- struct{}{}:
		case <-ctx.Done():
			return
		}
		req.Wait = 0
		res, err := rr.h.b.Consume(ctx, req)
		if ctx.Err() != nil {
			return
		}
		if err == nil && len(res.Records) == 0 {
			<-tokens
			req.Offset = res.NextOffset
			if req, err = rr.awaitRecords(ctx, req, wait); err == nil || ctx.Err() != nil {
				continue
			}
			select { // the error is handed over like a batch, with a token
			case tokens <- struct{}{}:
			case <-ctx.Done():
				return
			}
			res = api.ConsumeResult{NextOffset: req.Offset}
		}
		b := streamBatch{partition: req.Partition, records: res.Records, next: res.NextOffset, err: err}
		select {
		case out <- b: // the writer gives the token back
		case <-ctx.Done():
			return
		}
		if err != nil {
			return
		}
		req.Offset = res.NextOffset
	}
}

// awaitRecords long-polls req's partition for one record (up to wait) and
// returns req at the offset to read next; the record itself is dropped (the
// next read, holding a token, takes it with its batch).
func (rr recordsResource) awaitRecords(ctx context.Context, req api.ConsumeRequest, wait time.Duration) (api.ConsumeRequest, error) {
	probe := req
	probe.MaxRecords, probe.MaxBytes, probe.Wait = 1, 1, wait
	res, err := rr.h.b.Consume(ctx, probe)
	if err != nil {
		return req, err
	}
	if len(res.Records) > 0 {
		req.Offset = res.Records[0].Offset
	} else {
		req.Offset = res.NextOffset
	}
	return req, nil
}

// writeBatch writes a batch's records as events (or its error as an "error"
// event ending the stream); false when the stream is over.
func (rr recordsResource) writeBatch(sw *sseWriter, sp streamPlan, b streamBatch, last map[int32]int64) bool {
	if b.err != nil {
		data, _ := json.Marshal(api.NewProblem(b.err))
		sw.event("", "error", data)
		sw.flush()
		return false
	}
	var size int64
	var data []byte // one record's JSON, reused
	for _, rec := range b.records {
		if rec.Offset <= last[b.partition] {
			continue // never deliver an offset twice
		}
		data = api.AppendConsumed(data[:0], rec, sp.enc)
		last[b.partition] = rec.Offset
		if !sw.event(api.FormatEventID(b.partition, sp.partitions, last), "record", data) {
			return false
		}
		size += api.RecordSize(rec.Key, rec.Value, rec.Headers)
	}
	rr.h.metrics.consumed(sp.topic, len(b.records), size)
	return sw.flush()
}

// sseWriter writes text/event-stream framing; a write error ends the stream.
type sseWriter struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	buf bytes.Buffer
	err error
	// timeout bounds each write: a stream outlives any whole-response
	// deadline, but a client that stops reading is dropped and frees
	// what its stream holds.
	timeout time.Duration
	now     func() time.Time
}

func (s *sseWriter) open() {
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	_ = s.rc.SetWriteDeadline(time.Time{}) // a stream outlives the server's WriteTimeout
	s.w.WriteHeader(http.StatusOK)
	s.buf.WriteString("retry: 1000\n\n")
	s.flush()
}

func (s *sseWriter) event(id, name string, data []byte) bool {
	if id != "" {
		s.buf.WriteString("id: " + id + "\n")
	}
	s.buf.WriteString("event: " + name + "\ndata: ")
	s.buf.Write(data) // compact JSON: no newlines
	s.buf.WriteString("\n\n")
	if s.buf.Len() >= 64<<10 {
		return s.flush()
	}
	return s.err == nil
}

func (s *sseWriter) comment(text string) bool {
	s.buf.WriteString(": " + text + "\n\n")
	return s.flush()
}

func (s *sseWriter) flush() bool {
	if s.err != nil {
		return false
	}
	if s.timeout > 0 {
		_ = s.rc.SetWriteDeadline(s.now().Add(s.timeout))
	}
	if s.buf.Len() > 0 {
		_, s.err = s.w.Write(s.buf.Bytes())
		s.buf.Reset()
	}
	if s.err == nil {
		s.err = s.rc.Flush()
	}
	return s.err == nil
}
