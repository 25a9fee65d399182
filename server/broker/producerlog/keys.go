package producerlog

import (
	"sync"
	"time"

	"github.com/runnel/runnel/recordbatch"
	"github.com/runnel/runnel/server/broker/producers"
)

// Keys is a partition's index of HTTP idempotency keys: kept by the
// leader's keyed appends (Record) and a follower's copies of the leader's
// batches (Replay; Start for a log that holds none), rebuilt from the log
// the first time a keyed write reaches the partition while it is not
// loaded (after the partition was opened with batches in its log), and
// dropped (Reset) whenever the log changes other than by appends (a
// truncation, a recovery). The zero value is not loaded.
//
// The owning partition's append lock guards it: Load takes that lock
// itself, the other methods run with it held.
type Keys struct {
	index *producers.KeyIndex // nil until loaded
	gen   uint64              // counts Resets, so a Load sees the log change under its read
}

// Reset drops the index; the next keyed write rebuilds it.
func (k *Keys) Reset() {
	k.index = nil
	k.gen++
}

// Loaded reports whether the index is loaded.
func (k *Keys) Loaded() bool { return k.index != nil }

// Load rebuilds the index from log unless it is loaded: it reads the
// batches younger than the policy's expiration. The bulk of the read runs
// without mu, so other writes to the partition go on; only the batches
// appended meanwhile are read under it. A Reset meanwhile (or a failed
// read) has the whole read done again under mu.
func (k *Keys) Load(mu sync.Locker, log Log, policy *producers.KeyPolicy, now time.Time) error {
	mu.Lock()
	loaded, gen, end := k.index != nil, k.gen, log.EndOffset()
	mu.Unlock()
	if loaded {
		return nil
	}
	x := producers.NewKeyIndex(policy)
	err := Scan(log, now.Add(-x.Expiration()), 0, end, rebuild(x, now))
	mu.Lock()
	defer mu.Unlock()
	switch {
	case k.index != nil:
		return nil // another write loaded it meanwhile
	case err != nil || gen != k.gen:
		// The log changed under the read (or it failed): read it
		// again, whole, under the lock.
		return k.LoadLocked(log, policy, now)
	}
	if err := Scan(log, time.UnixMilli(0), end, log.EndOffset(), rebuild(x, now)); err != nil {
		return err
	}
	k.index = x
	return nil
}

// LoadLocked is Load with the append lock held throughout.
func (k *Keys) LoadLocked(log Log, policy *producers.KeyPolicy, now time.Time) error {
	if k.index != nil {
		return nil
	}
	x := producers.NewKeyIndex(policy)
	if err := Scan(log, now.Add(-x.Expiration()), 0, log.EndOffset(), rebuild(x, now)); err != nil {
		return err
	}
	k.index = x
	return nil
}

// Check answers a keyed append of count records (producers.KeyIndex.Check);
// the index must be loaded (LoadLocked).
func (k *Keys) Check(key producers.Key, count int32, now time.Time) (base, last int64, dup bool, err error) {
	return k.index.Check(key, count, now)
}

// Record remembers the keyed batch of count records just appended at base;
// nothing when the index is not loaded (it will be rebuilt from the log).
func (k *Keys) Record(key producers.Key, base int64, count int32, now time.Time) {
	if k.index == nil {
		return
	}
	k.index.Record(key, base, count, now.UnixMilli(), now)
}

// Start loads an empty index for a log that holds no batch (what a
// rebuild from it would make), unless the index is loaded.
func (k *Keys) Start(policy *producers.KeyPolicy) {
	if k.index == nil {
		k.index = producers.NewKeyIndex(policy)
	}
}

// Replay records one batch appended to the log (its header info) as a
// rebuild from the log would: a follower replays each batch it copies from
// its leader, so the replica that leads next has its index at once.
// Nothing when the index is not loaded.
func (k *Keys) Replay(info recordbatch.Info, now time.Time) {
	if k.index != nil {
		replayKey(k.index, info, now)
	}
}

// Equal reports whether k and o are both loaded with the same keys at now
// (producers.KeyIndex.Equal).
func (k *Keys) Equal(o *Keys, now time.Time) bool {
	return k.index != nil && o.index != nil && k.index.Equal(o.index, now)
}

// rebuild records in x the keyed batches a scan meets.
func rebuild(x *producers.KeyIndex, now time.Time) func([]byte, recordbatch.Info) {
	return func(_ []byte, info recordbatch.Info) { replayKey(x, info, now) }
}

// replayKey records in x the batch of info if it is keyed.
func replayKey(x *producers.KeyIndex, info recordbatch.Info, now time.Time) {
	if k, ok := producers.KeyOf(info.ProducerID, info.ProducerEpoch, info.BaseSequence, isControl(info)); ok {
		// The batch's own time, capped: a client clock in the future
		// must not keep a key forever.
		x.Record(k, info.BaseOffset, int32(info.LastOffset-info.BaseOffset)+1, min(info.MaxTimestamp, now.UnixMilli()), now)
	}
}
