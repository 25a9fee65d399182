package server

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// consumeDecompressLimit bounds the memory one HTTP consume may spend
// decompressing a batch.
const consumeDecompressLimit = 64 << 20

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
}

type readResult struct {
	records  []Record
	next     int64
	hwm      int64
	logStart int64
}

// resolveOffset turns a read position into an offset.
func (p *partition) resolveOffset(offset int64, ts *int64) (int64, error) {
	if ts != nil {
		off, _, ok, err := p.log.OffsetForTimestamp(*ts)
		if err != nil {
			return 0, fmt.Errorf("find offset for time %d: %w", *ts, err)
		}
		if !ok || off > p.hwm.Load() {
			return p.hwm.Load(), nil
		}
		return off, nil
	}
	switch offset {
	case offsetEarliest:
		return p.log.StartOffset(), nil
	case offsetLatest:
		return p.hwm.Load(), nil
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
	offset, err := p.resolveOffset(req.offset, req.timestamp)
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
		res, err := p.readDecoded(offset, req.maxRecords, req.maxBytes)
		if err != nil || len(res.records) > 0 || timer == nil {
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

// readDecoded reads records at or after offset below the high watermark.
func (p *partition) readDecoded(offset int64, maxRecords, maxBytes int) (readResult, error) {
	res := readResult{next: offset, hwm: p.hwm.Load(), logStart: p.log.StartOffset()}
	if offset < res.logStart || offset > res.hwm {
		return res, fmt.Errorf("%w: %d not in [%d, %d]", errOffsetOutOfRange, offset, res.logStart, res.hwm)
	}
	size := 0
	for res.next < res.hwm && len(res.records) < maxRecords && size < maxBytes {
		chunk, err := p.read(res.next, max(maxBytes-size, 1))
		if err != nil {
			return res, err
		}
		data, err := chunk.Bytes()
		chunk.Close()
		if err != nil {
			return res, fmt.Errorf("read %s-%d at %d: %w", p.topic, p.index, res.next, err)
		}
		if len(data) == 0 {
			break
		}
		before := res.next
		err = splitBatches(data, func(bv batchView) error {
			if len(res.records) >= maxRecords || size >= maxBytes {
				return errStopRead
			}
			if bv.isControl() {
				res.next = max(res.next, bv.lastOffset()+1)
				return nil
			}
			recs, err := decodeRecords(nil, bv, consumeDecompressLimit)
			if err != nil {
				return err
			}
			logAppend := bv.attrs&timestampTypeFlag != 0
			for _, r := range recs {
				if r.Offset < res.next {
					continue
				}
				recSize := len(r.Key) + len(r.Value)
				for _, h := range r.Headers {
					recSize += len(h.Key) + len(h.Value)
				}
				if len(res.records) >= maxRecords || (size+recSize > maxBytes && len(res.records) > 0) {
					return errStopRead
				}
				if logAppend {
					r.Timestamp = bv.maxTS
				}
				res.records = append(res.records, r)
				size += recSize
				res.next = r.Offset + 1
			}
			if len(res.records) < maxRecords && size < maxBytes {
				res.next = max(res.next, bv.lastOffset()+1)
			}
			return nil
		})
		if err != nil && !errors.Is(err, errStopRead) {
			return res, fmt.Errorf("decode %s-%d at %d: %w", p.topic, p.index, before, err)
		}
		if err != nil || res.next == before {
			break
		}
	}
	return res, nil
}

var errStopRead = errors.New("stop reading")
