package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/segments"
	"github.com/runnel/runnel/server/broker/readbuf"

	"github.com/runnel/runnel/recordbatch"
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

// ReadRequest is an HTTP-style read of decoded records from one partition.
type ReadRequest struct {
	Topic      string
	Partition  int32
	Offset     int64  // or offsetEarliest / offsetLatest
	Timestamp  *int64 // when set, start at the first record at or after it
	MaxRecords int
	MaxBytes   int
	Wait       time.Duration
	// ReadUncommitted reads up to the high watermark, records of open and
	// aborted transactions included; by default (read_committed) the read
	// stops at the last stable offset and aborted records are dropped.
	ReadUncommitted bool
	// Markers (with readUncommitted) returns transaction markers as
	// records with Control set, at their offsets; otherwise their offsets
	// are skipped.
	Markers bool
	// Each, when set, receives the records one at a time instead of
	// readResult.records: rec aliases the decoded batch and is valid only
	// during the call (see emitFunc). An error from each ends the read
	// with that error.
	Each emitFunc
}

// emitFunc takes one record read straight from its decoded batch (no
// copy of key, value or headers); transactional is its batch's flag;
// marker is set (and rec holds only offset and timestamp) when the record
// is a transaction marker (readRequest.markers).
type emitFunc func(rec *recordbatch.Record, transactional bool, marker *recordbatch.Marker) error

type readResult struct {
	Records  []Record
	Count    int // records read: len(records), or those given to each
	Next     int64
	HWM      int64
	LogStart int64
}

// ResolveOffset turns a read position into an offset; latest is the high
// watermark, or for a read_committed reader (committed) the last stable
// offset, as Kafka's consumers reset to it.
func (p *Partition) ResolveOffset(offset int64, ts *int64, committed bool) (int64, error) {
	end := p.hwm.Load()
	if committed && (ts != nil || offset == offsetLatest) {
		lso, err := p.LSO()
		if err != nil {
			return 0, err
		}
		end = min(end, lso)
	}
	if ts != nil {
		off, _, ok, err := p.log().OffsetForTimestamp(*ts)
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
		return p.log().StartOffset(), nil
	case offsetLatest:
		return end, nil
	}
	return offset, nil
}

// ReadRecords reads decoded records, long polling up to req.wait when there
// are none yet.
func (b *Broker) ReadRecords(ctx context.Context, req ReadRequest) (readResult, error) {
	p, err := b.Partition(req.Topic, req.Partition)
	if err != nil {
		return readResult{}, err
	}
	offset, err := p.ResolveOffset(req.Offset, req.Timestamp, !req.ReadUncommitted)
	if err != nil {
		return readResult{}, err
	}
	var timer <-chan time.Time
	if req.Wait > 0 {
		t := time.NewTimer(req.Wait)
		defer t.Stop()
		timer = t.C
	}
	for {
		changed := p.Changed()
		res, err := p.readDecodedEach(offset, req.MaxRecords, req.MaxBytes, !req.ReadUncommitted, req.Markers && req.ReadUncommitted, req.Each)
		if err != nil || res.Count > 0 || timer == nil {
			return res, err
		}
		select {
		case <-changed:
			if b.isClosed() {
				return res, ErrShuttingDown
			}
		case <-timer:
			return res, nil
		case <-ctx.Done():
			return res, ctx.Err()
		}
	}
}

func (b *Broker) isClosed() bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.closed
}

// ReadDecoded reads records at or after offset below the high watermark,
// decoding batches incrementally: it stops at maxRecords, and at maxBytes
// of decompressed records, framing included, so empty records count too
// (past the first record: a record larger than maxBytes is still returned
// alone, as Kafka's KIP-74 does).
// A stored batch that cannot be decoded ends the read after the records
// before it; read first, it is a *corruptBatchError naming it.
func (p *Partition) ReadDecoded(offset int64, maxRecords, maxBytes int, committed bool) (readResult, error) {
	return p.readDecodedEach(offset, maxRecords, maxBytes, committed, false, nil)
}

// readDecodedEach is readDecoded handing each record to each (when not
// nil) instead of collecting them; limits, read_committed filtering and
// corrupt batches work the same. With markers, transaction markers are
// records too (Record.Control, emitFunc's marker) instead of skipped.
func (p *Partition) readDecodedEach(offset int64, maxRecords, maxBytes int, committed, markers bool, each emitFunc) (readResult, error) {
	res := readResult{Next: offset, HWM: p.hwm.Load(), LogStart: p.log().StartOffset()}
	// Past the high watermark but within the log: nothing yet (see read).
	if end := max(res.HWM, p.log().EndOffset()); offset < res.LogStart || offset > end {
		return res, fmt.Errorf("%w: %d not in [%d, %d]", ErrOffsetOutOfRange, offset, res.LogStart, end)
	}
	r := decodedReader{p: p, res: &res, maxRecords: maxRecords, maxBytes: maxBytes, markers: markers, each: each}
	limit := res.HWM
	if committed {
		var err error
		if limit, r.aborted, err = p.committedRange(offset, limit); err != nil {
			return res, err
		}
	}
	buf := p.readBufs.Get()
	defer p.readBufs.Put(buf)
	for res.Next < limit && !r.full() {
		chunk, err := p.readUpTo(res.Next, max(maxBytes-r.size, 1), limit)
		if err != nil {
			return res, err
		}
		data, err := readbuf.ChunkBytes(chunk, buf)
		chunk.Close()
		if err != nil {
			return res, fmt.Errorf("read %s-%d at %d: %w", p.topic, p.index, res.Next, err)
		}
		before := res.Next
		if err := r.batches(data); err != nil {
			if r.emitErr != nil {
				return res, r.emitErr
			}
			if res.Count > 0 {
				return res, nil // the bad batch is the next read's first
			}
			return res, err
		}
		if res.Next == before {
			break
		}
	}
	return res, nil
}

// decodedReader is one readDecoded's progress.
type decodedReader struct {
	p          *Partition
	res        *readResult
	maxRecords int
	maxBytes   int
	size       int                   // decoded bytes in res.records
	aborted    []segments.AbortedTxn // read_committed: records to drop
	markers    bool                  // return markers as records
	each       emitFunc              // nil: collect into res.records
	emitErr    error                 // what each returned, ending the read
	view       recordbatch.Record    // the record being decoded, reused
}

func (r *decodedReader) full() bool {
	return r.res.Count >= r.maxRecords || r.size >= r.maxBytes
}

// batches decodes the whole batches at the start of data.
func (r *decodedReader) batches(data []byte) error {
	for !r.full() {
		info, ok, err := recordbatch.Next(data)
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
			r.res.Next = max(r.res.Next, info.NextOffset())
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
func (r *decodedReader) batch(b []byte, info recordbatch.Info) error {
	it, err := recordbatch.DecodeNext(b, info, r.p.maxRecordBytes)
	if err != nil {
		return err
	}
	defer it.Close()
	rec := &r.view
	for !r.full() && r.next(it, rec) {
		if rec.Offset < r.res.Next {
			continue
		}
		if !r.fits(rec.Size) {
			return nil // the record is the next read's first
		}
		if err := r.take(rec, info.Transactional); err != nil {
			return err
		}
		r.res.Count++
		r.size += rec.Size
		r.res.Next = rec.Offset + 1
	}
	if err := it.Err(); err != nil {
		return err
	}
	if !r.full() {
		r.res.Next = max(r.res.Next, info.NextOffset())
	}
	return nil
}

// next decodes the next record of it: for a reader with each, a view into
// the decoder's buffer (each sees it before the buffer moves on: no copy);
// for one that collects, a record of its own.
func (r *decodedReader) next(it *recordbatch.Records, rec *recordbatch.Record) bool {
	if r.each != nil {
		return it.NextView(rec)
	}
	return it.Next(rec)
}

// take hands rec to each, or collects it.
func (r *decodedReader) take(rec *recordbatch.Record, transactional bool) error {
	if r.each == nil {
		out := toRecord(*rec)
		out.Transactional = transactional
		r.res.Records = append(r.res.Records, out)
		return nil
	}
	if err := r.each(rec, transactional, nil); err != nil {
		r.emitErr = err
		return err
	}
	return nil
}

// fits reports whether size more bytes fit the read. A read that holds a
// record already is full otherwise (marked so: what did not fit is the
// next read's first); the first record is taken whatever its size.
func (r *decodedReader) fits(size int) bool {
	if r.size+size > r.maxBytes && r.res.Count > 0 {
		r.size = r.maxBytes
		return false
	}
	return true
}

// marker returns a control batch's marker as one record at the batch's
// offset. Marker types other than commit and abort are skipped, as Kafka
// clients skip them.
func (r *decodedReader) marker(b []byte, info recordbatch.Info) error {
	if info.BaseOffset < r.res.Next {
		return nil // already passed (the read began after it)
	}
	if !r.fits(info.Size) {
		return nil // the marker is the next read's first
	}
	// A one-record batch: its max timestamp is the record's, whatever
	// the timestamp type.
	m, err := recordbatch.ParseControl(b)
	if err != nil {
		return err
	}
	r.res.Next = info.NextOffset()
	if m.Type != recordbatch.ControlCommit && m.Type != recordbatch.ControlAbort {
		return nil
	}
	r.res.Count++
	r.size += info.Size
	if r.each != nil {
		r.view = recordbatch.Record{Offset: info.BaseOffset, Timestamp: info.MaxTimestamp}
		if err := r.each(&r.view, true, &m); err != nil {
			r.emitErr = err
			return err
		}
		return nil
	}
	r.res.Records = append(r.res.Records, Record{Offset: info.BaseOffset, Timestamp: info.MaxTimestamp, Transactional: true, Control: &m})
	return nil
}

// corrupt describes an undecodable stored batch. ok says whether info
// (and so the offset after the batch) is known.
func (r *decodedReader) corrupt(info recordbatch.Info, ok bool, err error) error {
	e := &CorruptBatchError{Topic: r.p.topic, Partition: r.p.index, Offset: r.res.Next, Next: -1, err: err}
	if ok {
		e.Offset, e.Next = max(info.BaseOffset, r.res.Next), info.NextOffset()
	}
	return e
}

func toRecord(r recordbatch.Record) Record {
	out := Record{Offset: r.Offset, Timestamp: r.Timestamp, Key: r.Key, Value: r.Value}
	for _, h := range r.Headers {
		out.Headers = append(out.Headers, kmsg.Header{Key: h.Key, Value: h.Value})
	}
	return out
}

// CorruptBatchError is a stored batch readers cannot decode (damaged on
// disk, or written before records were validated). It names the batch and
// the offset after it, so a consumer can move past it.
type CorruptBatchError struct {
	Topic     string
	Partition int32
	Offset    int64 // the first offset of the batch the read wanted
	Next      int64 // the offset after the batch; -1 when unknown
	err       error
}

func (e *CorruptBatchError) Error() string {
	msg := fmt.Sprintf("%s-%d: the record batch at offset %d cannot be decoded (%v)", e.Topic, e.Partition, e.Offset, e.err)
	if e.Next >= 0 {
		msg += fmt.Sprintf("; records resume at offset %d", e.Next)
	}
	return msg
}

func (e *CorruptBatchError) Unwrap() error { return e.err }

// abortedBatch reports whether a read_committed reader drops the batch: it
// belongs to a transaction its producer aborted.
func (r *decodedReader) abortedBatch(info recordbatch.Info) bool {
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

// ReadBatches reads whole batches from offset below the high watermark
// and checks each; a bad one ends the read after the batches before it
// (read first, it is a *corruptBatchError naming it). committed
// (read_committed) reads below the last stable offset and leaves out
// control batches and batches of aborted transactions (txnread.go).
func (p *Partition) ReadBatches(offset int64, maxBytes int, committed bool) (api.BatchResult, error) {
	res := api.BatchResult{NextOffset: offset, HighWatermark: p.hwm.Load(), StartOffset: p.log().StartOffset()}
	if offset < res.StartOffset || offset > res.HighWatermark {
		return res, fmt.Errorf("%w: %d not in [%d, %d]", ErrOffsetOutOfRange, offset, res.StartOffset, res.HighWatermark)
	}
	limit := res.HighWatermark
	var drop *decodedReader // read_committed: its aborted list decides
	if committed {
		var err error
		drop = &decodedReader{}
		if limit, drop.aborted, err = p.committedRange(offset, limit); err != nil {
			return res, err
		}
	}
	if offset >= limit {
		return res, nil
	}
	chunk, err := p.readUpTo(offset, maxBytes, limit)
	if err != nil {
		return res, err
	}
	data, err := chunk.Bytes()
	chunk.Close()
	if err != nil {
		return res, fmt.Errorf("read %s-%d at %d: %w", p.topic, p.index, offset, err)
	}
	good := 0
	var kept []byte // the batches served, once one was left out
	for rest := data; ; {
		info, ok, err := recordbatch.Next(rest)
		if err != nil || (!ok && len(rest) > 0 && good == 0) {
			if good > 0 {
				break // the bad batch is the next read's first
			}
			if err == nil {
				err = errors.New("truncated batch")
			}
			e := &CorruptBatchError{Topic: p.topic, Partition: p.index, Offset: res.NextOffset, Next: -1, err: err}
			if ok {
				e.Offset, e.Next = max(info.BaseOffset, res.NextOffset), info.NextOffset()
			}
			return res, e
		}
		if !ok {
			break
		}
		skip := drop != nil && (info.Control || drop.abortedBatch(info))
		if !info.Control && !skip {
			res.Records += int(info.LastOffset - max(info.BaseOffset, res.NextOffset) + 1)
		}
		if skip && kept == nil {
			kept = append(make([]byte, 0, len(data)), data[:good]...)
		} else if !skip && kept != nil {
			kept = append(kept, rest[:info.Size]...)
		}
		res.NextOffset = max(res.NextOffset, info.NextOffset())
		good += info.Size
		rest = rest[info.Size:]
	}
	res.Batches = data[:good]
	if kept != nil {
		res.Batches = kept
	}
	return res, nil
}
