package broker

import (
	"cmp"
	"context"
	"fmt"
	"hash/crc32"
	"slices"
	"time"

	"github.com/runnel/runnel/kafkaproto"
	"github.com/runnel/runnel/segments"

	"github.com/runnel/runnel/recordbatch"
)

// Idempotent producers: the partition remembers, per producer id, its epoch
// and its last few batches, as Kafka's leader does. A retried batch that was
// already stored is answered with its original offsets; a gap in sequence
// numbers is OUT_OF_ORDER_SEQUENCE_NUMBER.
//
// What this can and cannot guarantee. A producer id is a number in the
// batch header; Kafka does not bind it to a client, and neither can runnel
// without authenticated principals. So any client may write under any id.
// What runnel refuses is the damage that needs no such binding:
//   - ids the controller never allocated (UNKNOWN_PRODUCER_ID): producer
//     ids come only from InitProducerId, through the metadata log, so an
//     id at or above the image's allocation mark is forged;
//   - a retry that is not one: a batch is a duplicate only when its
//     sequence range AND its records (CRC-32C of the record bytes, which
//     a client resends unchanged) match a stored batch. Another client's
//     batch under the same sequence gets OUT_OF_ORDER_SEQUENCE_NUMBER, so a
//     producer is never acknowledged at an offset holding someone else's
//     record;
//   - InitProducerId for a non-transactional producer always hands out a
//     new id at epoch 0 (as Kafka's coordinator does), so it cannot be used
//     to bump and fence another producer's epoch.
//
// A higher epoch starting at sequence 0 is still taken without
// InitProducerId: Kafka's idempotent clients (the Java producer, sarama)
// bump their epoch locally after a failed batch (KIP-360), and refusing it
// would break them. A client that writes under another's id can therefore
// fence it; the victim gets INVALID_PRODUCER_EPOCH or
// OUT_OF_ORDER_SEQUENCE_NUMBER and starts over, but never a false
// acknowledgement.
//
// The table is bounded: a producer idle for producerPolicy.expiration is
// forgotten (Kafka's producer.id.expiration.ms), and a partition keeps at
// most producerPolicy.maxIDs ids, dropping the longest idle first.

const producerBatchesKept = 5 // Kafka's max.in.flight for idempotence

// Defaults for the producer state limits.
const (
	DefaultProducerIDExpiration       = 24 * time.Hour // Kafka's producer.id.expiration.ms
	DefaultMaxProducerIDsPerPartition = 10_000
	// producerIDWait bounds how long a write waits for this broker's
	// metadata to show an id the controller allocated moments ago
	// (through another broker).
	producerIDWait = 5 * time.Second
	// producerSweepEvery is how often a table drops expired ids.
	producerSweepEvery = time.Minute
)

// ProducerPolicy is the broker's producer-state configuration, shared by
// its partitions. Immutable.
type ProducerPolicy struct {
	Expiration time.Duration // > 0
	MaxIDs     int           // > 0
	// Allocated returns the first producer id the controller has not
	// handed out yet, per this broker's metadata, and a channel closed
	// when the metadata changes. nil: ids are not checked.
	Allocated func() (next int64, changed <-chan struct{})
}

var defaultProducerPolicy = &ProducerPolicy{Expiration: DefaultProducerIDExpiration, MaxIDs: DefaultMaxProducerIDsPerPartition}

type producerBatch struct {
	firstSeq, lastSeq int32
	sum               uint32 // batchSum: what a retry must match
	baseOffset        int64
	lastOffset        int64
}

type producerEntry struct {
	epoch     int16
	lastWrite int64           // unix ms of the producer's last write
	batches   []producerBatch // oldest first, at most producerBatchesKept
	// coordEpoch is the transaction coordinator epoch of the producer's
	// last marker here (-1: none): a marker from an older coordinator is
	// fenced (TRANSACTION_COORDINATOR_FENCED).
	coordEpoch int32
}

type producerTable struct {
	byID      map[int64]*producerEntry
	policy    *ProducerPolicy
	lastSweep time.Time
}

func newProducerTable(policy *ProducerPolicy) *producerTable {
	return &producerTable{byID: map[int64]*producerEntry{}, policy: policy}
}

// batchSum fingerprints a batch's records. The record bytes are what a
// client resends unchanged on a retry (the header's timestamps and CRC may
// change: LogAppendTime rewrites them in the stored copy).
func batchSum(b BatchView) uint32 { return crc32.Checksum(b.records(), castagnoli) }

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

// lookup returns the live entry of id; an expired one is dropped.
func (t *producerTable) lookup(id int64, now time.Time) (*producerEntry, bool) {
	e, ok := t.byID[id]
	if ok && now.UnixMilli()-e.lastWrite > t.policy.Expiration.Milliseconds() {
		delete(t.byID, id)
		return nil, false
	}
	return e, ok
}

// check decides what to do with batch b. It returns the stored batch when b
// is a duplicate of one.
func (t *producerTable) check(b BatchView, now time.Time) (producerBatch, bool, error) {
	e, ok := t.lookup(b.ProducerID, now)
	if !ok {
		return producerBatch{}, false, nil
	}
	switch {
	case b.epoch < e.epoch:
		return producerBatch{}, false, fmt.Errorf("%w: producer %d epoch %d is older than %d", ErrInvalidProducerEpoch, b.ProducerID, b.epoch, e.epoch)
	case b.epoch > e.epoch:
		if b.firstSeq != 0 {
			return producerBatch{}, false, fmt.Errorf("%w: producer %d new epoch %d must start at sequence 0, not %d", ErrOutOfOrderSequence, b.ProducerID, b.epoch, b.firstSeq)
		}
		return producerBatch{}, false, nil
	}
	for _, stored := range e.batches {
		if stored.firstSeq == b.firstSeq && stored.lastSeq == b.lastSequence() {
			if stored.sum != batchSum(b) {
				return producerBatch{}, false, fmt.Errorf("%w: producer %d sequences %d-%d are taken by different records",
					ErrOutOfOrderSequence, b.ProducerID, b.firstSeq, b.lastSequence())
			}
			return stored, true, nil
		}
	}
	if last, ok := e.last(); ok && b.firstSeq != nextSeq(last.lastSeq) {
		return producerBatch{}, false, fmt.Errorf("%w: producer %d expected sequence %d, got %d", ErrOutOfOrderSequence, b.ProducerID, nextSeq(last.lastSeq), b.firstSeq)
	}
	return producerBatch{}, false, nil
}

// record remembers a stored batch, written at unix ms at.
func (t *producerTable) record(b BatchView, baseOffset, at int64, now time.Time) {
	e, ok := t.lookup(b.ProducerID, now)
	if !ok || b.epoch > e.epoch {
		if !ok {
			t.makeRoom(now)
		}
		e = &producerEntry{epoch: b.epoch, coordEpoch: -1}
		if ok {
			e.coordEpoch = t.byID[b.ProducerID].coordEpoch
		}
		t.byID[b.ProducerID] = e
	}
	e.lastWrite = max(e.lastWrite, at)
	e.add(producerBatch{firstSeq: b.firstSeq, lastSeq: b.lastSequence(), sum: batchSum(b),
		baseOffset: baseOffset, lastOffset: baseOffset + int64(b.lastDelta)})
}

// marker remembers a transaction marker written at unix ms at: a newer
// producer epoch (the coordinator bumped it, fencing the old producer)
// starts a new entry, and the coordinator epoch is kept for fencing.
func (t *producerTable) marker(m recordbatch.Marker, at int64, now time.Time) {
	e, ok := t.lookup(m.ProducerID, now)
	if !ok {
		t.makeRoom(now)
		e = &producerEntry{epoch: m.ProducerEpoch, coordEpoch: -1}
		t.byID[m.ProducerID] = e
	} else if m.ProducerEpoch > e.epoch {
		e.epoch, e.batches = m.ProducerEpoch, nil
	}
	e.coordEpoch = max(e.coordEpoch, m.CoordinatorEpoch)
	e.lastWrite = max(e.lastWrite, at)
}

// makeRoom drops expired ids (at most once per producerSweepEvery, or when
// full) and, when the table is still full, the longest idle tenth, so that
// a flood of new ids costs amortized O(log n) per id.
func (t *producerTable) makeRoom(now time.Time) {
	full := len(t.byID) >= t.policy.MaxIDs
	if !full && now.Sub(t.lastSweep) < producerSweepEvery {
		return
	}
	t.lastSweep = now
	limit := now.UnixMilli() - t.policy.Expiration.Milliseconds()
	for id, e := range t.byID {
		if e.lastWrite < limit {
			delete(t.byID, id)
		}
	}
	if len(t.byID) < t.policy.MaxIDs {
		return
	}
	type idle struct {
		id   int64
		last int64
	}
	all := make([]idle, 0, len(t.byID))
	for id, e := range t.byID {
		all = append(all, idle{id, e.lastWrite})
	}
	slices.SortFunc(all, func(a, b idle) int { return cmp.Compare(a.last, b.last) })
	drop := len(all) - t.policy.MaxIDs + 1 + t.policy.MaxIDs/10
	for _, x := range all[:min(drop, len(all))] {
		delete(t.byID, x.id)
	}
}

// checkProducersLocked checks every idempotent batch of an append. When the
// whole append is one duplicate batch it returns the original result.
func (p *Partition) checkProducersLocked(views []BatchView, now time.Time) (AppendResult, bool, error) {
	idempotent := false
	for _, b := range views {
		idempotent = idempotent || b.Idempotent()
	}
	if !idempotent {
		return AppendResult{}, false, nil
	}
	if err := p.loadProducersLocked(now); err != nil {
		return AppendResult{}, false, err
	}
	for _, b := range views {
		if !b.Idempotent() {
			continue
		}
		stored, dup, err := p.producers.check(b, now)
		if err != nil {
			return AppendResult{}, false, err
		}
		if dup {
			if len(views) != 1 {
				return AppendResult{}, false, fmt.Errorf("%w: duplicate batch mixed with new ones", ErrOutOfOrderSequence)
			}
			return AppendResult{BaseOffset: stored.baseOffset, LastOffset: stored.lastOffset,
				LogAppendTime: -1, LogStart: p.log().StartOffset(), Duplicate: true}, true, nil
		}
	}
	return AppendResult{}, false, nil
}

// recordProducersLocked remembers the idempotent batches just appended at base.
func (p *Partition) recordProducersLocked(views []BatchView, base int64, now time.Time) {
	if p.producers == nil {
		return
	}
	for _, b := range views {
		if b.Idempotent() {
			p.producers.record(b, base, now.UnixMilli(), now)
		}
		base += int64(b.lastDelta) + 1
	}
}

// policy is the partition's producer policy (the default for partitions
// made outside a broker, as in tests).
func (p *Partition) policy() *ProducerPolicy {
	if p.producerPolicy != nil {
		return p.producerPolicy
	}
	return defaultProducerPolicy
}

// checkProducerIDs refuses batches under ids the controller never
// allocated. An id allocated through another broker may be a little ahead
// of this broker's metadata, so a write waits (up to producerIDWait) for
// the metadata to catch up before it is refused. Called before appendMu is
// taken: the wait holds up only this request.
func (p *Partition) checkProducerIDs(views []BatchView) error {
	alloc := p.policy().Allocated
	if alloc == nil {
		return nil
	}
	var highest int64 = -1
	for _, b := range views {
		if b.Idempotent() {
			highest = max(highest, b.ProducerID)
		}
	}
	if highest < 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), producerIDWait)
	defer cancel()
	for {
		next, changed := alloc()
		if highest < next {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("%w: producer id %d was never allocated (next is %d); get one with InitProducerId",
				ErrUnknownProducerID, highest, next)
		}
	}
}

// loadProducersLocked rebuilds the producer table from the log the first
// time an idempotent producer writes to this partition since it was opened
// (or since it last followed another leader), so duplicates are caught
// across restarts. Producers idle longer than the expiration are expired
// anyway, so the scan starts at the first batch younger than that.
func (p *Partition) loadProducersLocked(now time.Time) error {
	if p.producers != nil {
		return nil
	}
	t := newProducerTable(p.policy())
	end := p.log().EndOffset()
	start := p.log().StartOffset()
	since := now.Add(-t.policy.Expiration).UnixMilli()
	if off, _, ok, err := p.log().OffsetForTimestamp(since); err != nil {
		return fmt.Errorf("rebuild producer state of %s-%d: %w", p.Topic, p.Index, err)
	} else if !ok {
		start = end
	} else {
		start = max(start, off)
	}
	for off := start; off < end; {
		chunk, err := p.log().Read(off, 1<<20, end)
		if err != nil {
			return fmt.Errorf("rebuild producer state of %s-%d at %d: %w", p.Topic, p.Index, off, err)
		}
		data, err := chunk.Bytes()
		chunk.Close()
		if err != nil {
			return fmt.Errorf("rebuild producer state of %s-%d at %d: %w", p.Topic, p.Index, off, err)
		}
		next := off
		err = SplitBatches(data, func(b BatchView) error {
			// The batch's own time, capped: a client's clock in the
			// future must not keep an id forever.
			at := min(b.maxTS, now.UnixMilli())
			switch {
			case b.Idempotent() && !b.IsControl():
				t.record(b, b.baseOffset, at, now)
			case b.IsControl():
				if m, err := recordbatch.ParseControl(b.Raw); err == nil {
					t.marker(m, at, now)
				}
			}
			next = b.lastOffset() + 1
			return nil
		})
		if err != nil {
			return fmt.Errorf("rebuild producer state of %s-%d: %w", p.Topic, p.Index, err)
		}
		if next <= off {
			break
		}
		off = next
	}
	p.producers = t
	return nil
}

// ActiveProducers copies the producer table (in memory; appendMu is held
// only for the copy), with the transactions open in the log; a producer
// with an open transaction that the table does not hold (not loaded yet)
// is listed with what the log knows.
func (p *Partition) ActiveProducers() ([]kafkaproto.ActiveProducer, error) {
	open, err := p.log().OngoingTxns()
	if err != nil {
		return nil, err
	}
	start := make(map[int64]segments.OngoingTxn, len(open))
	for _, t := range open {
		start[t.ProducerID] = t
	}
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	out := []kafkaproto.ActiveProducer{}
	if p.producers != nil {
		for id, e := range p.producers.byID {
			a := kafkaproto.ActiveProducer{ID: id, Epoch: e.epoch, LastSequence: -1, LastTimestamp: e.lastWrite,
				CoordinatorEpoch: e.coordEpoch, TxnStartOffset: -1}
			if b, ok := e.last(); ok {
				a.LastSequence = b.lastSeq
			}
			if t, ok := start[id]; ok {
				a.TxnStartOffset = t.FirstOffset
				delete(start, id)
			}
			out = append(out, a)
		}
	}
	for _, t := range start {
		out = append(out, kafkaproto.ActiveProducer{ID: t.ProducerID, Epoch: t.ProducerEpoch, LastSequence: -1,
			LastTimestamp: -1, CoordinatorEpoch: -1, TxnStartOffset: t.FirstOffset})
	}
	slices.SortFunc(out, func(a, b kafkaproto.ActiveProducer) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}
