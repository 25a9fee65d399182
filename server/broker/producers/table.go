package producers

import (
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"time"

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
//     id at or above the image's allocation mark is forged (the broker
//     checks this with Policy.Allocated);
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
// The table is bounded: a producer idle for Policy.Expiration is
// forgotten (Kafka's producer.id.expiration.ms), and a partition keeps at
// most Policy.MaxIDs ids, dropping the longest idle first.

const batchesKept = 5 // Kafka's max.in.flight for idempotence

// Defaults for the producer state limits.
const (
	DefaultIDExpiration       = 24 * time.Hour // Kafka's producer.id.expiration.ms
	DefaultMaxIDsPerPartition = 10_000
)

// The refusals of a table; the broker returns them as its own sentinels.
var (
	ErrOutOfOrderSequence   = errors.New("out of order sequence number")
	ErrInvalidProducerEpoch = errors.New("invalid producer epoch")
	ErrCoordinatorFenced    = errors.New("transaction coordinator fenced")
)

// Policy is the broker's producer-state configuration, shared by its
// partitions. Immutable.
type Policy struct {
	Expiration time.Duration // > 0
	MaxIDs     int           // > 0
	// Allocated returns the first producer id the controller has not
	// handed out yet, per this broker's metadata, and a channel closed
	// when the metadata changes. nil: ids are not checked. The table does
	// not use it; the broker checks ids with it before appending.
	Allocated func() (next int64, changed <-chan struct{})
}

// DefaultPolicy is the policy of partitions made without one (tests).
var DefaultPolicy = &Policy{Expiration: DefaultIDExpiration, MaxIDs: DefaultMaxIDsPerPartition}

// Batch is what a table needs of one idempotent batch's header.
type Batch struct {
	ProducerID int64
	Epoch      int16
	FirstSeq   int32
	LastDelta  int32  // the batch's last offset delta: records - 1
	Records    []byte // the record bytes after the header
}

func (b Batch) lastSeq() int32 { return b.FirstSeq + b.LastDelta }

// sum fingerprints a batch's records. The record bytes are what a client
// resends unchanged on a retry (the header's timestamps and CRC may change:
// LogAppendTime rewrites them in the stored copy).
func (b Batch) sum() uint32 { return crc32.Checksum(b.Records, castagnoli) }

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

type storedBatch struct {
	firstSeq, lastSeq int32
	sum               uint32 // Batch.sum: what a retry must match
	baseOffset        int64
	lastOffset        int64
}

type entry struct {
	epoch     int16
	lastWrite int64         // unix ms of the producer's last write
	batches   []storedBatch // oldest first, at most batchesKept
	// coordEpoch is the transaction coordinator epoch of the producer's
	// last marker here (-1: none): a marker from an older coordinator is
	// fenced (TRANSACTION_COORDINATOR_FENCED).
	coordEpoch int32
}

func entryTime(e *entry) int64 { return e.lastWrite }

// Table is one partition's producer state. Not safe for concurrent use:
// the partition's append lock guards it.
type Table struct {
	ids    bounded[*entry]
	policy *Policy
}

// NewTable makes an empty table bounded by policy.
func NewTable(policy *Policy) *Table {
	return &Table{ids: newBounded(entryTime), policy: policy}
}

// Len is the number of producer ids held.
func (t *Table) Len() int { return len(t.ids.byID) }

func (e *entry) last() (storedBatch, bool) {
	if len(e.batches) == 0 {
		return storedBatch{}, false
	}
	return e.batches[len(e.batches)-1], true
}

// add keeps b as the newest batch. Once batchesKept are held the older
// ones move down in place: sliding the window along its array made a new
// array every few writes (issue 19: a quarter of a produce's allocations
// per partition).
func (e *entry) add(b storedBatch) {
	if len(e.batches) < batchesKept {
		e.batches = append(e.batches, b)
		return
	}
	copy(e.batches, e.batches[1:])
	e.batches[len(e.batches)-1] = b
}

// nextSeq is the sequence after seq; sequences wrap at MaxInt32.
func nextSeq(seq int32) int32 {
	if seq == 1<<31-1 {
		return 0
	}
	return seq + 1
}

func (t *Table) lookup(id int64, now time.Time) (*entry, bool) {
	return t.ids.lookup(id, now, t.policy.Expiration)
}

// Check decides what to do with batch b. When b is a duplicate of a stored
// batch it returns that batch's first and last offsets and dup true.
func (t *Table) Check(b Batch, now time.Time) (base, last int64, dup bool, err error) {
	e, ok := t.lookup(b.ProducerID, now)
	if !ok {
		return 0, 0, false, nil
	}
	switch {
	case b.Epoch < e.epoch:
		return 0, 0, false, fmt.Errorf("%w: producer %d epoch %d is older than %d", ErrInvalidProducerEpoch, b.ProducerID, b.Epoch, e.epoch)
	case b.Epoch > e.epoch:
		if b.FirstSeq != 0 {
			return 0, 0, false, fmt.Errorf("%w: producer %d new epoch %d must start at sequence 0, not %d", ErrOutOfOrderSequence, b.ProducerID, b.Epoch, b.FirstSeq)
		}
		return 0, 0, false, nil
	}
	for _, stored := range e.batches {
		if stored.firstSeq == b.FirstSeq && stored.lastSeq == b.lastSeq() {
			if stored.sum != b.sum() {
				return 0, 0, false, fmt.Errorf("%w: producer %d sequences %d-%d are taken by different records",
					ErrOutOfOrderSequence, b.ProducerID, b.FirstSeq, b.lastSeq())
			}
			return stored.baseOffset, stored.lastOffset, true, nil
		}
	}
	if last, ok := e.last(); ok && b.FirstSeq != nextSeq(last.lastSeq) {
		return 0, 0, false, fmt.Errorf("%w: producer %d expected sequence %d, got %d", ErrOutOfOrderSequence, b.ProducerID, nextSeq(last.lastSeq), b.FirstSeq)
	}
	return 0, 0, false, nil
}

// Record remembers a stored batch, written at baseOffset at unix ms at.
func (t *Table) Record(b Batch, baseOffset, at int64, now time.Time) {
	e, ok := t.lookup(b.ProducerID, now)
	if !ok || b.Epoch > e.epoch {
		if !ok {
			t.makeRoom(now)
		}
		e = &entry{epoch: b.Epoch, coordEpoch: -1}
		if ok {
			e.coordEpoch = t.ids.byID[b.ProducerID].coordEpoch
		}
		t.ids.set(b.ProducerID, e)
	}
	e.lastWrite = max(e.lastWrite, at)
	e.add(storedBatch{firstSeq: b.FirstSeq, lastSeq: b.lastSeq(), sum: b.sum(),
		baseOffset: baseOffset, lastOffset: baseOffset + int64(b.LastDelta)})
}

// CheckMarker refuses a transaction marker from a fenced producer epoch or
// an older transaction coordinator than the last marker's.
func (t *Table) CheckMarker(m recordbatch.Marker, now time.Time) error {
	e, ok := t.lookup(m.ProducerID, now)
	switch {
	case !ok:
		return nil
	case e.epoch > m.ProducerEpoch:
		return fmt.Errorf("%w: marker for producer %d epoch %d, the partition has seen epoch %d",
			ErrInvalidProducerEpoch, m.ProducerID, m.ProducerEpoch, e.epoch)
	case e.coordEpoch > m.CoordinatorEpoch:
		return fmt.Errorf("%w: marker for producer %d from coordinator epoch %d, the partition has seen %d",
			ErrCoordinatorFenced, m.ProducerID, m.CoordinatorEpoch, e.coordEpoch)
	}
	return nil
}

// Marker remembers a transaction marker written at unix ms at: a newer
// producer epoch (the coordinator bumped it, fencing the old producer)
// starts a new entry, and the coordinator epoch is kept for fencing.
func (t *Table) Marker(m recordbatch.Marker, at int64, now time.Time) {
	e, ok := t.lookup(m.ProducerID, now)
	if !ok {
		t.makeRoom(now)
		e = &entry{epoch: m.ProducerEpoch, coordEpoch: -1}
		t.ids.set(m.ProducerID, e)
	} else if m.ProducerEpoch > e.epoch {
		e.epoch, e.batches = m.ProducerEpoch, nil
	}
	e.coordEpoch = max(e.coordEpoch, m.CoordinatorEpoch)
	e.lastWrite = max(e.lastWrite, at)
}

// Equal reports whether t and u hold the same producers at now, as far as
// Check, CheckMarker and expiry can tell: the same live ids, each with the
// same epoch, coordinator epoch, time of last write and stored batches.
// (A follower's table, kept as it copies the leader's batches, must equal
// the one a rebuild from its log makes.)
func (t *Table) Equal(u *Table, now time.Time) bool {
	return t.ids.equal(&u.ids, now, t.policy.Expiration, func(a, b *entry) bool {
		return a.epoch == b.epoch && a.coordEpoch == b.coordEpoch && a.lastWrite == b.lastWrite && slices.Equal(a.batches, b.batches)
	})
}

func (t *Table) makeRoom(now time.Time) {
	t.ids.makeRoom(now, t.policy.Expiration, t.policy.MaxIDs)
}

// Producer is what the table holds of one producer id (DescribeProducers).
type Producer struct {
	ID               int64
	Epoch            int16
	LastSequence     int32 // -1: no batch kept
	LastTimestamp    int64 // unix ms of its last write
	CoordinatorEpoch int32 // -1: no marker seen
}

// Producers lists the ids held, in no order (expired ones included until
// they are swept, as before).
func (t *Table) Producers() []Producer {
	out := make([]Producer, 0, len(t.ids.byID))
	for id, e := range t.ids.byID {
		p := Producer{ID: id, Epoch: e.epoch, LastSequence: -1, LastTimestamp: e.lastWrite, CoordinatorEpoch: e.coordEpoch}
		if b, ok := e.last(); ok {
			p.LastSequence = b.lastSeq
		}
		out = append(out, p)
	}
	return out
}
