package server

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/segments"
)

// consumeMaxRecordBytes bounds one decoded record of an HTTP read (or
// --max-decompressed-batch-bytes when larger, which keeps records appended
// since below it): a larger one is reported as a corrupt batch.
const consumeMaxRecordBytes = 64 << 20

// Offset positions, as in Kafka's ListOffsets.
const (
	offsetLatest   int64 = -1
	offsetEarliest int64 = -2
)

// readRequest is an HTTP-style read of decoded records from one partition.
type readRequest struct {
	topic      string
	partition  int32
	offset     int64  // or offsetEarliest / offsetLatest
	timestamp  *int64 // when set, start at the first record at or after it
	maxRecords int
	maxBytes   int
	wait       time.Duration
	// readUncommitted reads up to the high watermark, records of open and
	// aborted transactions included; by default (read_committed) the read
	// stops at the last stable offset and aborted records are dropped.
	readUncommitted bool
	// markers (with readUncommitted) returns transaction markers as
	// records with Control set, at their offsets; otherwise their offsets
	// are skipped.
	markers bool
	// each, when set, receives the records one at a time instead of
	// readResult.records: rec aliases the decoded batch and is valid only
	// during the call (see emitFunc). An error from each ends the read
	// with that error.
	each emitFunc
}

// emitFunc takes one record read straight from its decoded batch (no
// copy of key, value or headers); transactional is its batch's flag;
// marker is set (and rec holds only offset and timestamp) when the record
// is a transaction marker (readRequest.markers).
type emitFunc func(rec *segments.Record, transactional bool, marker *segments.Marker) error

type readResult struct {
	records  []Record
	count    int // records read: len(records), or those given to each
	next     int64
	hwm      int64
	logStart int64
}

// resolveOffset turns a read position into an offset; latest is the high
// watermark, or for a read_committed reader (committed) the last stable
// offset, as Kafka's consumers reset to it.
func (p *partition) resolveOffset(offset int64, ts *int64, committed bool) (int64, error) {
	end := p.hwm.Load()
	if committed && (ts != nil || offset == offsetLatest) {
		lso, err := p.lso()
		if err != nil {
			return 0, err
		}
		end = min(end, lso)
	}
	if ts != nil {
		off, _, ok, err := p.log.OffsetForTimestamp(*ts)
		if err != nil {
			return 0, fmt.Errorf("find offset for time %d: %w", *ts, err)
		}
		if !ok || off > end {
			return end, nil
		}
		return off, nil
	}
	switch offset {
	case offsetEarliest:
		return p.log.StartOffset(), nil
	case offsetLatest:
		return end, nil
	}
	return offset, nil
}

// readRecords reads decoded records, long polling up to req.wait when there
// are none yet.
func (b *broker) readRecords(ctx context.Context, req readRequest) (readResult, error) {
	p, err := b.partition(req.topic, req.partition)
	if err != nil {
		return readResult{}, err
	}
	offset, err := p.resolveOffset(req.offset, req.timestamp, !req.readUncommitted)
	if err != nil {
		return readResult{}, err
	}
	var timer <-chan time.Time
	if req.wait > 0 {
		t := time.NewTimer(req.wait)
		defer t.Stop()
		timer = t.C
	}
	for {
		changed := p.changed()
		res, err := p.readDecodedEach(offset, req.maxRecords, req.maxBytes, !req.readUncommitted, req.markers && req.readUncommitted, req.each)
		if err != nil || res.count > 0 || timer == nil {
			return res, err
		}
		select {
		case <-changed:
			if b.isClosed() {
				return res, errShuttingDown
			}
		case <-timer:
			return res, nil
		case <-ctx.Done():
			return res, ctx.Err()
		}
	}
}

func (b *broker) isClosed() bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.closed
}

// readDecoded reads records at or after offset below the high watermark,
// decoding batches incrementally: it stops at maxRecords, and at maxBytes
// of decompressed records, framing included, so empty records count too
// (past the first record: a record larger than maxBytes is still returned
// alone, as Kafka's KIP-74 does).
// A stored batch that cannot be decoded ends the read after the records
// before it; read first, it is a *corruptBatchError naming it.
func (p *partition) readDecoded(offset int64, maxRecords, maxBytes int, committed bool) (readResult, error) {
	return p.readDecodedEach(offset, maxRecords, maxBytes, committed, false, nil)
}

// readDecodedEach is readDecoded handing each record to each (when not
// nil) instead of collecting them; limits, read_committed filtering and
// corrupt batches work the same. With markers, transaction markers are
// records too (Record.Control, emitFunc's marker) instead of skipped.
func (p *partition) readDecodedEach(offset int64, maxRecords, maxBytes int, committed, markers bool, each emitFunc) (readResult, error) {
	res := readResult{next: offset, hwm: p.hwm.Load(), logStart: p.log.StartOffset()}
	// Past the high watermark but within the log: nothing yet (see read).
	if end := max(res.hwm, p.log.EndOffset()); offset < res.logStart || offset > end {
		return res, fmt.Errorf("%w: %d not in [%d, %d]", errOffsetOutOfRange, offset, res.logStart, end)
	}
	r := decodedReader{p: p, res: &res, maxRecords: maxRecords, maxBytes: maxBytes, markers: markers, each: each}
	limit := res.hwm
	if committed {
		var err error
		if limit, r.aborted, err = p.committedRange(offset, limit); err != nil {
			return res, err
		}
	}
	buf := p.readBufs.get()
	defer p.readBufs.put(buf)
	for res.next < limit && !r.full() {
		chunk, err := p.readUpTo(res.next, max(maxBytes-r.size, 1), limit)
		if err != nil {
			return res, err
		}
		data, err := chunkBytes(chunk, buf)
		chunk.Close()
		if err != nil {
			return res, fmt.Errorf("read %s-%d at %d: %w", p.topic, p.index, res.next, err)
		}
		before := res.next
		if err := r.batches(data); err != nil {
			if r.emitErr != nil {
				return res, r.emitErr
			}
			if res.count > 0 {
				return res, nil // the bad batch is the next read's first
			}
			return res, err
		}
		if res.next == before {
			break
		}
	}
	return res, nil
}

// decodedReader is one readDecoded's progress.
type decodedReader struct {
	p          *partition
	res        *readResult
	maxRecords int
	maxBytes   int
	size       int                   // decoded bytes in res.records
	aborted    []segments.AbortedTxn // read_committed: records to drop
	markers    bool                  // return markers as records
	each       emitFunc              // nil: collect into res.records
	emitErr    error                 // what each returned, ending the read
	view       segments.Record       // each's record, reused
}

func (r *decodedReader) full() bool {
	return r.res.count >= r.maxRecords || r.size >= r.maxBytes
}

// batches decodes the whole batches at the start of data.
func (r *decodedReader) batches(data []byte) error {
	for !r.full() {
		info, ok, err := segments.NextBatch(data)
		if err != nil {
			return r.corrupt(info, ok, err)
		}
		if !ok {
			return nil
		}
		switch {
		case info.Control && r.markers:
			err = r.marker(data[:info.Size], info)
		case info.Control || r.abortedBatch(info):
			r.res.next = max(r.res.next, info.NextOffset())
		default:
			err = r.batch(data[:info.Size], info)
		}
		if err != nil {
			return r.corrupt(info, true, err)
		}
		data = data[info.Size:]
	}
	return nil
}

// batch decodes the records of one batch until the read is full.
func (r *decodedReader) batch(b []byte, info segments.BatchInfo) error {
	it, err := segments.DecodeNextBatch(b, info, r.p.maxRecordBytes)
	if err != nil {
		return err
	}
	defer it.Close()
	if r.each != nil {
		return r.emitBatch(it, info)
	}
	var rec segments.Record
	for !r.full() && it.Next(&rec) {
		if rec.Offset < r.res.next {
			continue
		}
		if r.size+rec.Size > r.maxBytes && r.res.count > 0 {
			r.size = r.maxBytes // full: the record is the next read's first
			return nil
		}
		out := toRecord(rec)
		out.Transactional = info.Transactional
		r.res.records = append(r.res.records, out)
		r.res.count++
		r.size += rec.Size
		r.res.next = rec.Offset + 1
	}
	if err := it.Err(); err != nil {
		return err
	}
	if !r.full() {
		r.res.next = max(r.res.next, info.NextOffset())
	}
	return nil
}

// marker returns a control batch's marker as one record at the batch's
// offset. Marker types other than commit and abort are skipped, as Kafka
// clients skip them.
func (r *decodedReader) marker(b []byte, info segments.BatchInfo) error {
	if info.BaseOffset < r.res.next {
		return nil // already passed (the read began after it)
	}
	if r.size+info.Size > r.maxBytes && r.res.count > 0 {
		r.size = r.maxBytes // full: the marker is the next read's first
		return nil
	}
	// A one-record batch: its max timestamp is the record's, whatever
	// the timestamp type.
	m, err := segments.ParseControlBatch(b)
	if err != nil {
		return err
	}
	r.res.next = info.NextOffset()
	if m.Type != segments.ControlCommit && m.Type != segments.ControlAbort {
		return nil
	}
	r.res.count++
	r.size += info.Size
	if r.each != nil {
		r.view = segments.Record{Offset: info.BaseOffset, Timestamp: info.MaxTimestamp}
		if err := r.each(&r.view, true, &m); err != nil {
			r.emitErr = err
			return err
		}
		return nil
	}
	r.res.records = append(r.res.records, Record{Offset: info.BaseOffset, Timestamp: info.MaxTimestamp, Transactional: true, Control: &m})
	return nil
}

// emitBatch is batch for a reader with each: the records go to each
// straight from the decoder's buffer, with no copy.
func (r *decodedReader) emitBatch(it *segments.Records, info segments.BatchInfo) error {
	rec := &r.view
	for !r.full() && it.NextView(rec) {
		if rec.Offset < r.res.next {
			continue
		}
		if r.size+rec.Size > r.maxBytes && r.res.count > 0 {
			r.size = r.maxBytes // full: the record is the next read's first
			return nil
		}
		if err := r.each(rec, info.Transactional, nil); err != nil {
			r.emitErr = err
			return err
		}
		r.res.count++
		r.size += rec.Size
		r.res.next = rec.Offset + 1
	}
	if err := it.Err(); err != nil {
		return err
	}
	if !r.full() {
		r.res.next = max(r.res.next, info.NextOffset())
	}
	return nil
}

// corrupt describes an undecodable stored batch. ok says whether info
// (and so the offset after the batch) is known.
func (r *decodedReader) corrupt(info segments.BatchInfo, ok bool, err error) error {
	e := &corruptBatchError{topic: r.p.topic, partition: r.p.index, offset: r.res.next, next: -1, err: err}
	if ok {
		e.offset, e.next = max(info.BaseOffset, r.res.next), info.NextOffset()
	}
	return e
}

func toRecord(r segments.Record) Record {
	out := Record{Offset: r.Offset, Timestamp: r.Timestamp, Key: r.Key, Value: r.Value}
	for _, h := range r.Headers {
		out.Headers = append(out.Headers, kmsg.Header{Key: h.Key, Value: h.Value})
	}
	return out
}

// corruptBatchError is a stored batch readers cannot decode (damaged on
// disk, or written before records were validated). It names the batch and
// the offset after it, so a consumer can move past it.
type corruptBatchError struct {
	topic     string
	partition int32
	offset    int64 // the first offset of the batch the read wanted
	next      int64 // the offset after the batch; -1 when unknown
	err       error
}

func (e *corruptBatchError) Error() string {
	msg := fmt.Sprintf("%s-%d: the record batch at offset %d cannot be decoded (%v)", e.topic, e.partition, e.offset, e.err)
	if e.next >= 0 {
		msg += fmt.Sprintf("; records resume at offset %d", e.next)
	}
	return msg
}

func (e *corruptBatchError) Unwrap() error { return e.err }

// abortedBatch reports whether a read_committed reader drops the batch: it
// belongs to a transaction its producer aborted.
func (r *decodedReader) abortedBatch(info segments.BatchInfo) bool {
	if !info.Transactional {
		return false
	}
	for _, a := range r.aborted {
		if a.ProducerID == info.ProducerID && a.FirstOffset <= info.BaseOffset && info.BaseOffset <= a.LastOffset {
			return true
		}
	}
	return false
}

// chunkBytes loads a chunk's bytes into *buf (grown as needed) when the
// chunk is a file range, else returns its own copy. The bytes are valid
// until the next call with the same buf: records read from them are
// either copied (readDecoded) or handed over synchronously (each).
func chunkBytes(c segments.Chunk, buf *[]byte) ([]byte, error) {
	fr, ok := c.(segments.FileRange)
	if !ok || buf == nil {
		return c.Bytes()
	}
	f, off, n := fr.FileRange()
	b := slices.Grow((*buf)[:0], int(n))[:n]
	*buf = b
	if _, err := f.ReadAt(b, off); err != nil {
		return nil, fmt.Errorf("segments: read chunk: %w", err)
	}
	return b, nil
}

// readBufPool recycles the buffers HTTP reads load stored batches into:
// a 4 MiB read used to allocate (and have cleared) 4 MiB per request.
// Buffers grown past readBufKeep are dropped, not kept; the memory budget
// (--http-memory-budget) already counts a read's bytes while it runs.
// Safe for concurrent use; the zero value is ready; a nil pool allocates.
type readBufPool struct{ p sync.Pool }

const readBufKeep = 16 << 20

func (rp *readBufPool) get() *[]byte {
	if rp == nil {
		return new([]byte)
	}
	if b, ok := rp.p.Get().(*[]byte); ok {
		return b
	}
	return new([]byte)
}

func (rp *readBufPool) put(b *[]byte) {
	if rp == nil || cap(*b) == 0 || cap(*b) > readBufKeep {
		return
	}
	rp.p.Put(b)
}
