package server

import (
	"fmt"
)

// Idempotent producers: the partition remembers, per producer id, its epoch
// and its last few batches, as Kafka's leader does. A retried batch that was
// already stored is answered with its original offsets; a gap in sequence
// numbers is OUT_OF_ORDER_SEQUENCE_NUMBER.

const producerBatchesKept = 5 // Kafka's max.in.flight for idempotence

type producerBatch struct {
	firstSeq, lastSeq int32
	baseOffset        int64
	lastOffset        int64
}

type producerEntry struct {
	epoch   int16
	batches []producerBatch // oldest first, at most producerBatchesKept
}

type producerTable struct {
	byID map[int64]*producerEntry
}

func (e *producerEntry) last() (producerBatch, bool) {
	if len(e.batches) == 0 {
		return producerBatch{}, false
	}
	return e.batches[len(e.batches)-1], true
}

func (e *producerEntry) add(b producerBatch) {
	e.batches = append(e.batches, b)
	if len(e.batches) > producerBatchesKept {
		e.batches = e.batches[1:]
	}
}

// nextSeq is the sequence after seq; sequences wrap at MaxInt32.
func nextSeq(seq int32) int32 {
	if seq == 1<<31-1 {
		return 0
	}
	return seq + 1
}

// check decides what to do with batch b. It returns the stored batch when b
// is a duplicate of one.
func (t *producerTable) check(b batchView) (producerBatch, bool, error) {
	e, ok := t.byID[b.producerID]
	if !ok {
		return producerBatch{}, false, nil
	}
	switch {
	case b.epoch < e.epoch:
		return producerBatch{}, false, fmt.Errorf("%w: producer %d epoch %d is older than %d", errInvalidProducerEpoch, b.producerID, b.epoch, e.epoch)
	case b.epoch > e.epoch:
		if b.firstSeq != 0 {
			return producerBatch{}, false, fmt.Errorf("%w: producer %d new epoch %d must start at sequence 0, not %d", errOutOfOrderSequence, b.producerID, b.epoch, b.firstSeq)
		}
		return producerBatch{}, false, nil
	}
	for _, stored := range e.batches {
		if stored.firstSeq == b.firstSeq && stored.lastSeq == b.lastSequence() {
			return stored, true, nil
		}
	}
	if last, ok := e.last(); ok && b.firstSeq != nextSeq(last.lastSeq) {
		return producerBatch{}, false, fmt.Errorf("%w: producer %d expected sequence %d, got %d", errOutOfOrderSequence, b.producerID, nextSeq(last.lastSeq), b.firstSeq)
	}
	return producerBatch{}, false, nil
}

// record remembers a stored batch.
func (t *producerTable) record(b batchView, baseOffset int64) {
	e, ok := t.byID[b.producerID]
	if !ok || b.epoch > e.epoch {
		e = &producerEntry{epoch: b.epoch}
		t.byID[b.producerID] = e
	}
	e.add(producerBatch{firstSeq: b.firstSeq, lastSeq: b.lastSequence(),
		baseOffset: baseOffset, lastOffset: baseOffset + int64(b.lastDelta)})
}

// checkProducersLocked checks every idempotent batch of an append. When the
// whole append is one duplicate batch it returns the original result.
func (p *partition) checkProducersLocked(views []batchView) (appendResult, bool, error) {
	idempotent := false
	for _, b := range views {
		idempotent = idempotent || b.idempotent()
	}
	if !idempotent {
		return appendResult{}, false, nil
	}
	if err := p.loadProducersLocked(); err != nil {
		return appendResult{}, false, err
	}
	for _, b := range views {
		if !b.idempotent() {
			continue
		}
		stored, dup, err := p.producers.check(b)
		if err != nil {
			return appendResult{}, false, err
		}
		if dup {
			if len(views) != 1 {
				return appendResult{}, false, fmt.Errorf("%w: duplicate batch mixed with new ones", errOutOfOrderSequence)
			}
			return appendResult{baseOffset: stored.baseOffset, lastOffset: stored.lastOffset,
				logAppendTime: -1, logStart: p.log.StartOffset(), duplicate: true}, true, nil
		}
	}
	return appendResult{}, false, nil
}

// recordProducersLocked remembers the idempotent batches just appended at base.
func (p *partition) recordProducersLocked(views []batchView, base int64) {
	if p.producers == nil {
		return
	}
	for _, b := range views {
		if b.idempotent() {
			p.producers.record(b, base)
		}
		base += int64(b.lastDelta) + 1
	}
}

// loadProducersLocked rebuilds the producer table from the log the first
// time an idempotent producer writes to this partition since it was opened,
// so duplicates are caught across restarts.
func (p *partition) loadProducersLocked() error {
	if p.producers != nil {
		return nil
	}
	t := &producerTable{byID: map[int64]*producerEntry{}}
	end := p.log.EndOffset()
	for off := p.log.StartOffset(); off < end; {
		chunk, err := p.log.Read(off, 1<<20, end)
		if err != nil {
			return fmt.Errorf("rebuild producer state of %s-%d at %d: %w", p.topic, p.index, off, err)
		}
		data, err := chunk.Bytes()
		chunk.Close()
		if err != nil {
			return fmt.Errorf("rebuild producer state of %s-%d at %d: %w", p.topic, p.index, off, err)
		}
		next := off
		err = splitBatches(data, func(b batchView) error {
			if b.idempotent() && !b.isControl() {
				t.record(b, b.baseOffset)
			}
			next = b.lastOffset() + 1
			return nil
		})
		if err != nil {
			return fmt.Errorf("rebuild producer state of %s-%d: %w", p.topic, p.index, err)
		}
		if next <= off {
			break
		}
		off = next
	}
	p.producers = t
	return nil
}
