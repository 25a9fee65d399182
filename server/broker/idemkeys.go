package broker

import (
	"fmt"
	"time"

	"github.com/runnel/runnel/recordbatch"
	"github.com/runnel/runnel/server/broker/producers"
)

// The partition's side of idempotent HTTP produce (Idempotency-Key; how a
// key is carried and why, in package producers' keys.go): the key index of
// a partition leader, checked and updated by keyed appends and rebuilt from
// the log, and the batch fields a key is stamped into.

// keyOf reads the key a batch carries; ok false for other batches.
func keyOf(b batchView) (producers.Key, bool) {
	return producers.KeyOf(b.ProducerID, b.epoch, b.firstSeq, b.IsControl())
}

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
	if err := p.loadKeysLocked(now); err != nil {
		return AppendResult{}, false, err
	}
	base, last, dup, err := p.keys.Check(*k, views[0].lastDelta+1, now)
	if !dup {
		return AppendResult{}, false, err
	}
	return AppendResult{BaseOffset: base, LastOffset: last, LogAppendTime: -1, LogStart: p.log().StartOffset(), Duplicate: true}, true, nil
}

// recordKeyLocked remembers the keyed batch just appended at base.
func (p *Partition) recordKeyLocked(k *producers.Key, views []batchView, base int64, now time.Time) {
	if k == nil || p.keys == nil {
		return
	}
	p.keys.Record(*k, base, views[0].lastDelta+1, now.UnixMilli(), now)
}

// resetKeysLocked drops the key index when the log changed under it (a
// follower's append, truncation or reset); the next leader write rebuilds it.
func (p *Partition) resetKeysLocked() {
	p.keys = nil
	p.keysGen++
}

// loadKeys rebuilds the key index from the log the first time a keyed
// write reaches this partition since it was opened or last followed a
// leader: it reads the batches younger than the expiration. The bulk of
// the read runs without appendMu, so other writes to the partition go on;
// only the batches appended meanwhile are read under it.
func (p *Partition) loadKeys(now time.Time) error {
	p.appendMu.Lock()
	loaded, gen, end := p.keys != nil, p.keysGen, p.log().EndOffset()
	p.appendMu.Unlock()
	if loaded {
		return nil
	}
	x := producers.NewKeyIndex(p.keyPolicy())
	since := now.Add(-x.Expiration())
	err := p.scanLog(since, end, rebuildKeys(x, now))
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	switch {
	case p.keys != nil:
		return nil // another write loaded it meanwhile
	case err != nil || gen != p.keysGen:
		// The log changed under the read (or it failed): read it
		// again, whole, under the lock.
		return p.loadKeysLocked(now)
	}
	if err := p.scanLog(time.UnixMilli(0), p.log().EndOffset(), rebuildKeys(x, now), end); err != nil {
		return fmt.Errorf("rebuild idempotency keys of %s-%d: %w", p.topic, p.index, err)
	}
	p.keys = x
	return nil
}

// loadKeysLocked is loadKeys with appendMu held throughout.
func (p *Partition) loadKeysLocked(now time.Time) error {
	if p.keys != nil {
		return nil
	}
	x := producers.NewKeyIndex(p.keyPolicy())
	if err := p.scanLog(now.Add(-x.Expiration()), p.log().EndOffset(), rebuildKeys(x, now)); err != nil {
		return fmt.Errorf("rebuild idempotency keys of %s-%d: %w", p.topic, p.index, err)
	}
	p.keys = x
	return nil
}

// rebuildKeys records in x the keyed batches a log scan meets.
func rebuildKeys(x *producers.KeyIndex, now time.Time) func(batchView) {
	return func(b batchView) {
		if k, ok := keyOf(b); ok {
			// The batch's own time, capped: a client clock in the
			// future must not keep a key forever.
			x.Record(k, b.baseOffset, b.lastDelta+1, min(b.maxTS, now.UnixMilli()), now)
		}
	}
}

// scanLog calls fn for every batch below end from the first one with a
// timestamp at or after since (and at or after from[0] when given).
func (p *Partition) scanLog(since time.Time, end int64, fn func(batchView), from ...int64) error {
	off, _, ok, err := p.log().OffsetForTimestamp(since.UnixMilli())
	if err != nil || !ok {
		return err
	}
	for _, f := range from {
		off = max(off, f)
	}
	for off = max(off, p.log().StartOffset()); off < end; {
		chunk, err := p.log().Read(off, 1<<20, end)
		if err != nil {
			return fmt.Errorf("at %d: %w", off, err)
		}
		data, err := chunk.Bytes()
		chunk.Close()
		if err != nil {
			return fmt.Errorf("at %d: %w", off, err)
		}
		next := off
		err = splitBatches(data, func(b batchView) error {
			fn(b)
			next = b.lastOffset() + 1
			return nil
		})
		if err != nil {
			return err
		}
		if next <= off {
			break
		}
		off = next
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
	if err := p.loadKeysLocked(now); err != nil {
		return err
	}
	_, _, _, err := p.keys.Check(k, count, now)
	return err
}
