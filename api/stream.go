package api

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
)

// streamBatch is what a partition reader hands to the writer.
type streamBatch struct {
	partition int32
	records   []ConsumedRecord
	next      int64
	err       error
}

// ParseEventID parses a Last-Event-ID value into partition → last delivered offset.
func ParseEventID(s string) (map[int32]int64, error) {
	out := map[int32]int64{}
	for _, pair := range strings.Split(s, ",") {
		ps, os, ok := strings.Cut(strings.TrimSpace(pair), ":")
		p, err1 := strconv.ParseInt(ps, 10, 32)
		o, err2 := strconv.ParseInt(os, 10, 64)
		if !ok || err1 != nil || err2 != nil || p < 0 || o < -1 {
			return nil, &FieldError{Field: "header.Last-Event-ID", Err: ErrInvalidRequest,
				Msg: "must be partition:offset pairs separated by commas"}
		}
		out[int32(p)] = o
	}
	return out, nil
}

// FormatEventID formats the id of an event for partition first, then the
// others in the order of partitions.
func FormatEventID(first int32, partitions []int32, last map[int32]int64) string {
	var b strings.Builder
	b.WriteString(strconv.Itoa(int(first)) + ":" + strconv.FormatInt(last[first], 10))
	for _, p := range partitions {
		if p != first {
			b.WriteString("," + strconv.Itoa(int(p)) + ":" + strconv.FormatInt(last[p], 10))
		}
	}
	return b.String()
}

// streamPlan is a parsed stream request.
type streamPlan struct {
	topic      string
	partitions []int32
	start      map[int32]ConsumeRequest
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
	offset, err := parseOffset(q.Get("offset"), OffsetLatest)
	if err != nil {
		return sp, err
	}
	ts, err := timestampParam(q)
	if err != nil {
		return sp, err
	}
	resume := map[int32]int64{}
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		if resume, err = ParseEventID(id); err != nil {
			return sp, err
		}
	}
	if sp.partitions, err = rr.streamPartitions(r.Context(), sp.topic, q.Get("partitions")); err != nil {
		return sp, err
	}
	sp.start = make(map[int32]ConsumeRequest, len(sp.partitions))
	for _, p := range sp.partitions {
		req := ConsumeRequest{Topic: sp.topic, Partition: p, Offset: offset, Timestamp: ts,
			MaxRecords: streamBatchRecords, MaxBytes: streamBatchBytes}
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
			return nil, &FieldError{Field: "query.partitions", Err: ErrInvalidRequest, Msg: "must be partition numbers separated by commas"}
		}
		if !slices.Contains(all, int32(p)) {
			return nil, &FieldError{Field: "query.partitions", Err: ErrUnknownPartition, Msg: fmt.Sprintf("topic %q has no partition %d", topic, p)}
		}
		if !slices.Contains(out, int32(p)) {
			out = append(out, int32(p))
		}
	}
	return out, nil
}

func (rr recordsResource) stream(w http.ResponseWriter, r *http.Request) {
	sp, err := rr.streamPlan(r)
	if err != nil {
		rr.h.problem(w, r, err)
		return
	}
	// Resolve every start position (and read what is already there) before
	// the first byte, so errors are still proper problems and ids complete.
	first := make([]streamBatch, 0, len(sp.partitions))
	last := make(map[int32]int64, len(sp.partitions))
	for _, p := range sp.partitions {
		res, err := rr.h.b.Consume(r.Context(), sp.start[p])
		if err != nil {
			rr.h.problem(w, r, err)
			return
		}
		first = append(first, streamBatch{partition: p, records: res.Records, next: res.NextOffset})
		start := res.NextOffset // nothing read: the resolved start
		if len(res.Records) > 0 {
			start = res.Records[0].Offset
		}
		last[p] = start - 1
	}
	ctx, cancel := context.WithCancel(r.Context())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	batches := make(chan streamBatch, len(sp.partitions))
	for _, b := range first {
		req := sp.start[b.partition]
		req.Offset, req.Timestamp, req.Wait = b.next, nil, min(streamPollWait, rr.h.opts.MaxWait)
		wg.Add(1)
		go func() {
			defer wg.Done()
			rr.readPartition(ctx, req, batches)
		}()
	}
	sw := &sseWriter{w: w, rc: http.NewResponseController(w)}
	sw.open()
	for _, b := range first {
		if !rr.writeBatch(sw, sp, b, last) {
			return
		}
	}
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
			if !rr.writeBatch(sw, sp, b, last) {
				return
			}
		}
	}
}

// readPartition long-polls one partition until ctx is done or an error, which
// it hands on as the last batch.
func (rr recordsResource) readPartition(ctx context.Context, req ConsumeRequest, out chan<- streamBatch) {
	for {
		res, err := rr.h.b.Consume(ctx, req)
		if ctx.Err() != nil {
			return
		}
		b := streamBatch{partition: req.Partition, records: res.Records, next: res.NextOffset, err: err}
		if err == nil && len(res.Records) == 0 {
			req.Offset = res.NextOffset
			continue
		}
		select {
		case out <- b:
		case <-ctx.Done():
			return
		}
		if err != nil {
			return
		}
		req.Offset = res.NextOffset
	}
}

// writeBatch writes a batch's records as events (or its error as an "error"
// event ending the stream); false when the stream is over.
func (rr recordsResource) writeBatch(sw *sseWriter, sp streamPlan, b streamBatch, last map[int32]int64) bool {
	if b.err != nil {
		data, _ := json.Marshal(newProblem(b.err))
		sw.event("", "error", data)
		sw.flush()
		return false
	}
	var size int64
	for _, rec := range b.records {
		if rec.Offset <= last[b.partition] {
			continue // never deliver an offset twice
		}
		data, err := json.Marshal(encodeRecord(rec, sp.enc))
		if err != nil {
			return false
		}
		last[b.partition] = rec.Offset
		if !sw.event(FormatEventID(b.partition, sp.partitions, last), "record", data) {
			return false
		}
		size += recordSize(rec.Key, rec.Value, rec.Headers)
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
	if s.buf.Len() > 0 {
		_, s.err = s.w.Write(s.buf.Bytes())
		s.buf.Reset()
	}
	if s.err == nil {
		s.err = s.rc.Flush()
	}
	return s.err == nil
}
