package broker

import (
	"errors"
	"fmt"

	"github.com/runnel/runnel/segments"
)

// Reading committed records (isolation read_committed): a reader sees the
// partition only below its last stable offset (LSO), the smaller of the
// high watermark and the first offset of the oldest transaction still open
// (segments.Log.FirstUnstableOffset), and learns which producers' records
// in what it read were aborted. Kafka clients drop those batches themselves
// (Fetch's aborted_transactions); HTTP readers get them dropped by the
// server (data.go). read_uncommitted readers read up to the high watermark
// as before, transactional records included; markers only when an HTTP
// reader asks for them (readRequest.markers), as records of their own.

// LSO is the partition's last stable offset.
func (p *Partition) LSO() (int64, error) {
	hw := p.hwm.Load()
	fuo, err := p.log().FirstUnstableOffset()
	if errors.Is(err, segments.ErrStorage) {
		return 0, storageErr(p.topic, p.index, err)
	}
	if err != nil {
		return 0, fmt.Errorf("last stable offset of %s-%d: %w", p.topic, p.index, err)
	}
	return min(hw, fuo), nil
}

// ReadCommitted returns whole batches from offset below the last stable
// offset (empty when offset is at or past it; an offset outside [log start,
// high watermark] is out of range) and the aborted transactions with
// records at or past offset below the LSO.
func (p *Partition) ReadCommitted(offset int64, maxBytes int) (segments.Chunk, int64, []segments.AbortedTxn, error) {
	hwm := p.hwm.Load()
	if offset > hwm || offset < p.log().StartOffset() {
		return nil, 0, nil, fmt.Errorf("%w: %d not in [%d, %d]", ErrOffsetOutOfRange, offset, p.log().StartOffset(), hwm)
	}
	lso, aborted, err := p.committedRange(offset, hwm)
	if err != nil || offset >= lso {
		return nil, lso, nil, err
	}
	c, err := p.log().Read(offset, maxBytes, lso)
	if errors.Is(err, segments.ErrOffsetOutOfRange) {
		return nil, 0, nil, fmt.Errorf("%w: %v", ErrOffsetOutOfRange, err)
	}
	c, err = unpinSmall(c, err) // an answer holds it with every other partition's (smallread.go)
	return c, lso, aborted, err
}

// committedRange is what a read_committed read from offset may return: up
// to the last stable offset (at most hw), and the aborted transactions in
// that range.
func (p *Partition) committedRange(offset, hw int64) (int64, []segments.AbortedTxn, error) {
	lso, err := p.LSO()
	if err != nil {
		return 0, nil, err
	}
	limit := min(lso, hw)
	if offset >= limit {
		return limit, nil, nil
	}
	aborted, err := p.log().AbortedTxns(offset, limit)
	if err != nil {
		return 0, nil, fmt.Errorf("aborted transactions of %s-%d: %w", p.topic, p.index, err)
	}
	return limit, aborted, nil
}
