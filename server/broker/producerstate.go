package broker

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/runnel/runnel/kafkaproto"
	"github.com/runnel/runnel/recordbatch"
	"github.com/runnel/runnel/server/broker/producerlog"
	"github.com/runnel/runnel/server/broker/producers"
)

// The partition's side of idempotent and transactional producers: the
// table itself (what is a duplicate, what is out of order, what expires)
// is package producers', its rebuild from the log package producerlog's;
// this file checks and records an append's batches against it under
// appendMu and refuses ids the controller never allocated.

// producerIDWait bounds how long a write waits for this broker's metadata
// to show an id the controller allocated moments ago (through another
// broker).
const producerIDWait = 5 * time.Second

// producerBatch is what the producer table needs of an idempotent batch.
func (b batchView) producerBatch() producers.Batch {
	return producers.Batch{ProducerID: b.ProducerID, Epoch: b.epoch, FirstSeq: b.firstSeq,
		LastDelta: b.lastDelta, Records: b.records()}
}

// checkProducersLocked checks every idempotent batch of an append. When the
// whole append is one duplicate batch it returns the original result.
func (p *Partition) checkProducersLocked(views []batchView, now time.Time) (AppendResult, bool, error) {
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
	t := p.producers.Get()
	for _, b := range views {
		if !b.Idempotent() {
			continue
		}
		base, last, dup, err := t.Check(b.producerBatch(), now)
		if err != nil {
			return AppendResult{}, false, err
		}
		if dup {
			if len(views) != 1 {
				return AppendResult{}, false, fmt.Errorf("%w: duplicate batch mixed with new ones", ErrOutOfOrderSequence)
			}
			return AppendResult{BaseOffset: base, LastOffset: last,
				LogAppendTime: -1, LogStart: p.log().StartOffset(), Duplicate: true}, true, nil
		}
	}
	return AppendResult{}, false, nil
}

// recordProducersLocked remembers the idempotent batches just appended at base.
func (p *Partition) recordProducersLocked(views []batchView, base int64, now time.Time) {
	t := p.producers.Get()
	if t == nil {
		return
	}
	for _, b := range views {
		if b.Idempotent() {
			t.Record(b.producerBatch(), base, now.UnixMilli(), now)
		}
		base += int64(b.lastDelta) + 1
	}
}

// policy is the partition's producer policy (the default for partitions
// made outside a broker, as in tests).
func (p *Partition) policy() *producers.Policy {
	if p.producerPolicy != nil {
		return p.producerPolicy
	}
	return producers.DefaultPolicy
}

// checkProducerIDs refuses batches under ids the controller never
// allocated. An id allocated through another broker may be a little ahead
// of this broker's metadata, so a write waits (up to producerIDWait) for
// the metadata to catch up before it is refused. Called before appendMu is
// taken: the wait holds up only this request.
func (p *Partition) checkProducerIDs(views []batchView) error {
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

// loadProducers rebuilds the producer table from the log, for an append
// of views that holds an idempotent batch, if it is not loaded: the first
// time an idempotent producer writes to this partition since it was
// opened with batches in its log (or since its log was truncated or
// recovered; a follower keeps its table as it appends:
// followProducersLocked). The bulk of the read runs without appendMu
// (producerlog.Table.Load): a rebuild reads up to the producer
// expiration's worth of the log.
func (p *Partition) loadProducers(views []batchView, now time.Time) error {
	if !slices.ContainsFunc(views, batchView.Idempotent) {
		return nil
	}
	return p.producersErr(p.producers.Load(&p.appendMu, p.log(), p.policy(), now))
}

// loadProducersLocked is loadProducers with appendMu held throughout, for
// a table dropped between loadProducers and the lock.
func (p *Partition) loadProducersLocked(now time.Time) error {
	return p.producersErr(p.producers.LoadLocked(p.log(), p.policy(), now))
}

func (p *Partition) producersErr(err error) error {
	if err != nil {
		return fmt.Errorf("rebuild producer state of %s-%d: %w", p.topic, p.index, err)
	}
	return nil
}

// producersUnknown reports whether this replica's log holds batches its
// producer table never saw: the table is not loaded and the log is open
// and not empty.
func (p *Partition) producersUnknown() bool {
	log := p.log()
	if log == nil || p.producers.MaybeLoaded() {
		return false
	}
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	return p.producers.Get() == nil && log.StartOffset() < log.EndOffset()
}

// copiedBatch is one batch a follower copied from its leader, with its
// header.
type copiedBatch struct {
	raw  []byte
	info recordbatch.Info
}

// followProducersLocked keeps the producer table and the key index in line
// with the batches a follower just appended to its log, replaying each as
// a rebuild from the log would (producerlog.Replay, Keys.Replay: the
// batch's max timestamp capped at now), so that the replica that leads
// next checks duplicates, sequences and epochs without reading its log
// (issue 19: after a kill -9, the new leaders of thousands of partitions
// each rebuilt its table under appendMu on its first idempotent write,
// which held up every produce to them). Kafka's followers keep producer
// state too.
//
// A log that held no batch before starts them empty: that is what a
// rebuild would make, and the case of every new partition. A table that
// is not loaded on a log that holds batches (after a restart, a
// truncation) stays so here: the rebuild reads up to the producer
// expiration's worth of the log, which would hold up this follower's
// appends (and the leader's acks=all writes waiting for them) if done
// under appendMu. It is rebuilt in the background (producerrebuild.go),
// or at the first idempotent write as leader if that comes first. The key
// index of such a log is rebuilt at the first keyed write, as before.
func (p *Partition) followProducersLocked(batches []copiedBatch, wasEmpty bool, now time.Time) {
	if wasEmpty {
		p.startProducersLocked()
	}
	for _, b := range batches {
		p.producers.Replay(b.raw, b.info, now)
		p.keys.Replay(b.info, now)
	}
}

// startProducersLocked loads an empty producer table and key index for a
// log that holds no batch, unless they are loaded.
func (p *Partition) startProducersLocked() {
	p.producers.Start(p.policy())
	p.keys.Start(p.keyPolicy())
}

// forgetProducersLocked drops the producer table and the key index when
// the log changed other than by an append they followed (a truncation, a
// reset, a recovery, a failed append): they are rebuilt from the log when
// needed, or start empty again now if the log holds no batch.
func (p *Partition) forgetProducersLocked() {
	p.producers.Reset()
	p.resetKeysLocked()
	if log := p.log(); log.StartOffset() == log.EndOffset() {
		p.startProducersLocked()
	}
}

// ActiveProducers copies the producer table (in memory; appendMu is held
// only for the copy), with the transactions open in the log
// (producerlog.Active).
func (p *Partition) ActiveProducers() ([]kafkaproto.ActiveProducer, error) {
	open, err := p.log().OngoingTxns()
	if err != nil {
		return nil, err
	}
	var held []producers.Producer
	p.appendMu.Lock()
	if t := p.producers.Get(); t != nil {
		held = t.Producers()
	}
	p.appendMu.Unlock()
	return producerlog.Active(held, open), nil
}
