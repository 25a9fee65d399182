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
type Keys struct{ kept[producers.KeyIndex] }

// Reset drops the index; the next keyed write rebuilds it.
func (k *Keys) Reset() { k.reset() }

// Load rebuilds the index from log unless it is loaded: it reads the
// batches younger than the policy's expiration, the bulk of them without
// mu (kept.load).
func (k *Keys) Load(mu sync.Locker, log Log, policy *producers.KeyPolicy, now time.Time) error {
	if k.loaded.Load() {
		return nil // the caller checks again under mu; no rule made (kept.go's rule says why)
	}
	return k.load(mu, log, keyRule(policy, now))
}

// LoadLocked is Load with the append lock held throughout.
func (k *Keys) LoadLocked(log Log, policy *producers.KeyPolicy, now time.Time) error {
	if k.v != nil {
		return nil
	}
	return k.loadLocked(log, keyRule(policy, now))
}

func keyRule(policy *producers.KeyPolicy, now time.Time) rule[producers.KeyIndex] {
	return rule[producers.KeyIndex]{
		empty:  func() *producers.KeyIndex { return producers.NewKeyIndex(policy) },
		since:  now.Add(-policy.Expiration),
		replay: func(x *producers.KeyIndex, _ []byte, info recordbatch.Info) { replayKey(x, info, now) },
	}
}

// Check answers a keyed append of count records (producers.KeyIndex.Check);
// the index must be loaded (LoadLocked).
func (k *Keys) Check(key producers.Key, count int32, now time.Time) (base, last int64, dup bool, err error) {
	return k.v.Check(key, count, now)
}

// Record remembers the keyed batch of count records just appended at base;
// nothing when the index is not loaded (it will be rebuilt from the log).
func (k *Keys) Record(key producers.Key, base int64, count int32, now time.Time) {
	if k.v != nil {
		k.v.Record(key, base, count, now.UnixMilli(), now)
	}
}

// Start loads an empty index for a log that holds no batch (what a
// rebuild from it would make), unless the index is loaded.
func (k *Keys) Start(policy *producers.KeyPolicy) {
	k.start(func() *producers.KeyIndex { return producers.NewKeyIndex(policy) })
}

// Replay records one batch appended to the log (its header info) as a
// rebuild from the log would: a follower replays each batch it copies from
// its leader, so the replica that leads next has its index at once.
// Nothing when the index is not loaded.
func (k *Keys) Replay(info recordbatch.Info, now time.Time) {
	if k.v != nil {
		replayKey(k.v, info, now)
	}
}

// Equal reports whether k and o are both loaded with the same keys at now
// (producers.KeyIndex.Equal).
func (k *Keys) Equal(o *Keys, now time.Time) bool {
	return k.v != nil && o.v != nil && k.v.Equal(o.v, now)
}

// replayKey records in x the batch of info if it is keyed.
func replayKey(x *producers.KeyIndex, info recordbatch.Info, now time.Time) {
	if k, ok := producers.KeyOf(info.ProducerID, info.ProducerEpoch, info.BaseSequence, isControl(info)); ok {
		// The batch's own time, capped: a client clock in the future
		// must not keep a key forever.
		x.Record(k, info.BaseOffset, int32(info.LastOffset-info.BaseOffset)+1, min(info.MaxTimestamp, now.UnixMilli()), now)
	}
}
