package broker

import (
	"fmt"
	"time"

	"github.com/runnel/runnel/recordbatch"
	"github.com/runnel/runnel/server/broker/producers"
)

// The partition's side of idempotent HTTP produce (Idempotency-Key; how a
// key is carried and why, in package producers' keys.go): the key index of
// a partition leader (producerlog.Keys, rebuilt from the log), checked and
// updated by keyed appends under appendMu, and the batch fields a key is
// stamped into.

// StampKey writes k into the producer fields of batch (one batch as
// recordbatch.Build makes it) and recomputes its CRC.
func StampKey(batch []byte, k producers.Key) {
	recordbatch.SetProducer(batch, k.ID, k.Epoch(), k.Seq())
}

// refuseKeyProducerIDs refuses batches a client sent under an id of the
// key range (only the HTTP door writes those).
func refuseKeyProducerIDs(views []batchView) error {
	for _, b := range views {
		if producers.IsKeyID(b.ProducerID) {
			return fmt.Errorf("%w: producer ids from %d up are reserved (HTTP Idempotency-Key); get one with InitProducerId",
				ErrUnknownProducerID, producers.KeyIDBase)
		}
	}
	return nil
}

func (p *Partition) keyPolicy() *producers.KeyPolicy {
	if p.keyPolicyCfg != nil {
		return p.keyPolicyCfg
	}
	return producers.DefaultKeyPolicy
}

// checkKeyLocked answers a keyed append that repeats one already stored.
// The caller loaded the index (loadKeys) before taking appendMu; if it was
// reset since, it is rebuilt here, under the lock.
func (p *Partition) checkKeyLocked(k *producers.Key, views []batchView, now time.Time) (AppendResult, bool, error) {
	if k == nil {
		return AppendResult{}, false, nil
	}
	if len(views) != 1 {
		return AppendResult{}, false, fmt.Errorf("%w: a keyed append is one batch", recordbatch.ErrCorruptBatch)
	}
	if err := p.keys.LoadLocked(p.log(), p.keyPolicy(), now); err != nil {
		return AppendResult{}, false, p.keysErr(err)
	}
	base, last, dup, err := p.keys.Check(*k, views[0].lastDelta+1, now)
	if !dup {
		return AppendResult{}, false, err
	}
	return AppendResult{BaseOffset: base, LastOffset: last, LogAppendTime: -1, LogStart: p.log().StartOffset(), Duplicate: true}, true, nil
}

// recordKeyLocked remembers the keyed batch just appended at base.
func (p *Partition) recordKeyLocked(k *producers.Key, views []batchView, base int64, now time.Time) {
	if k != nil {
		p.keys.Record(*k, base, views[0].lastDelta+1, now)
	}
}

// resetKeysLocked drops the key index when the log changed under it other
// than by an append (truncation, reset, recovery); the next leader write
// rebuilds it (followProducersLocked keeps it through a follower's appends).
func (p *Partition) resetKeysLocked() { p.keys.Reset() }

// loadKeys rebuilds the key index from the log the first time a keyed
// write reaches this partition while it is not loaded (after the
// partition opened a log holding batches, or its log was truncated or
// recovered: producerlog.Keys.Load: most of the read without appendMu).
func (p *Partition) loadKeys(now time.Time) error {
	return p.keysErr(p.keys.Load(&p.appendMu, p.log(), p.keyPolicy(), now))
}

func (p *Partition) keysErr(err error) error {
	if err != nil {
		return fmt.Errorf("rebuild idempotency keys of %s-%d: %w", p.topic, p.index, err)
	}
	return nil
}

// PeekKeys refuses a reused key on this node's partitions before any of
// them is written, so such a request writes nothing here.
func PeekKeys(parts map[int32]*Partition, byPart map[int32][]recordbatch.NewRecord, k *producers.Key) error {
	if k == nil {
		return nil
	}
	for part, p := range parts {
		if err := p.peekKey(*k, int32(len(byPart[part])), p.wallNow()); err != nil {
			return err
		}
	}
	return nil
}

func (p *Partition) peekKey(k producers.Key, count int32, now time.Time) error {
	if err := p.loadKeys(now); err != nil {
		return err
	}
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	if err := p.keys.LoadLocked(p.log(), p.keyPolicy(), now); err != nil {
		return p.keysErr(err)
	}
	_, _, _, err := p.keys.Check(k, count, now)
	return err
}
