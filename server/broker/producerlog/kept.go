package producerlog

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/runnel/runnel/recordbatch"
)

// kept is a partition's memory of its log that is kept by its appends and
// rebuilt from the log when it is not loaded (Table, Keys): v, nil until
// loaded, and gen, which counts the drops (reset), so that a load that
// read the log without the append lock sees the log change under it.
type kept[T any] struct {
	v   *T
	gen uint64
	// loaded is v != nil, read without the append lock: a load finds
	// it loaded without taking the lock on every write (a hint only; the
	// caller looks again under the lock).
	loaded atomic.Bool
}

func (k *kept[T]) set(v *T) {
	k.v = v
	k.loaded.Store(v != nil)
}

// Loaded reports whether it is loaded (the append lock held).
func (k *kept[T]) Loaded() bool { return k.v != nil }

// MaybeLoaded reports whether it was loaded lately, without the append
// lock: a hint, to be checked again under it.
func (k *kept[T]) MaybeLoaded() bool { return k.loaded.Load() }

// rule is how a memory is rebuilt: an empty one, the time the read starts
// at (what is older has expired) and what one batch read does to it. Its
// closures escape (two allocations each time one is made), so Table and
// Keys make one only when not loaded: they are asked on every idempotent
// or keyed write, twice (issue 19: 4 of a produce's ~12 allocations per
// partition).
type rule[T any] struct {
	empty  func() *T
	since  time.Time
	replay func(x *T, raw []byte, info recordbatch.Info)
}

func (k *kept[T]) reset() {
	k.set(nil)
	k.gen++
}

// load rebuilds v from log unless it is loaded. The bulk of the read runs
// without mu, so the partition's appends go on; only the batches appended
// meanwhile are read under it. A reset meanwhile (or a failed read) has
// the whole read done again under mu.
func (k *kept[T]) load(mu sync.Locker, log Log, r rule[T]) error {
	if k.loaded.Load() {
		return nil // the caller checks again under mu
	}
	mu.Lock()
	loaded, gen, end := k.v != nil, k.gen, log.EndOffset()
	mu.Unlock()
	if loaded {
		return nil
	}
	x := r.empty()
	err := Scan(log, r.since, 0, end, func(raw []byte, info recordbatch.Info) { r.replay(x, raw, info) })
	mu.Lock()
	defer mu.Unlock()
	switch {
	case k.v != nil:
		return nil // another write loaded it meanwhile
	case err != nil || gen != k.gen:
		// The log changed under the read (or it failed): read it
		// again, whole, under the lock.
		return k.loadLocked(log, r)
	}
	if err := Scan(log, time.UnixMilli(0), end, log.EndOffset(), func(raw []byte, info recordbatch.Info) { r.replay(x, raw, info) }); err != nil {
		return err
	}
	k.set(x)
	return nil
}

// loadLocked is load with the append lock held throughout.
func (k *kept[T]) loadLocked(log Log, r rule[T]) error {
	if k.v != nil {
		return nil
	}
	x := r.empty()
	if err := Scan(log, r.since, 0, log.EndOffset(), func(raw []byte, info recordbatch.Info) { r.replay(x, raw, info) }); err != nil {
		return err
	}
	k.set(x)
	return nil
}

// start loads an empty memory for a log that holds no batch (what a
// rebuild from it would make), unless one is loaded.
func (k *kept[T]) start(empty func() *T) {
	if k.v == nil {
		k.set(empty())
	}
}
