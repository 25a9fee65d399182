package producers

import (
	"cmp"
	"slices"
	"time"
)

// sweepEvery is how often a table or key index drops expired ids when it
// is not full.
const sweepEvery = time.Minute

// bounded is the id map of a producer table or a key index, with the one
// expiry and eviction rule both follow: an entry expires when its last
// write is older than the expiration, and the map holds at most a maximum
// number of ids, dropping the longest idle first.
type bounded[V any] struct {
	byID      map[int64]V   // nil until the first set: a follower holds one per partition it follows
	at        func(V) int64 // unix ms of an entry's last write
	lastSweep time.Time
}

func newBounded[V any](at func(V) int64) bounded[V] {
	return bounded[V]{at: at}
}

// set stores the entry of id.
func (b *bounded[V]) set(id int64, e V) {
	if b.byID == nil {
		b.byID = map[int64]V{}
	}
	b.byID[id] = e
}

// lookup returns the live entry of id; an expired one is dropped.
func (b *bounded[V]) lookup(id int64, now time.Time, expiration time.Duration) (V, bool) {
	e, ok := b.byID[id]
	if ok && now.UnixMilli()-b.at(e) > expiration.Milliseconds() {
		delete(b.byID, id)
		var zero V
		return zero, false
	}
	return e, ok
}

// equal reports whether b and o hold the same live ids at now, with
// entries eq calls equal. Entries expired at now count as absent: lookup
// treats them so.
func (b *bounded[V]) equal(o *bounded[V], now time.Time, expiration time.Duration, eq func(V, V) bool) bool {
	limit := now.UnixMilli() - expiration.Milliseconds()
	live := func(x *bounded[V]) int {
		n := 0
		for _, e := range x.byID {
			if x.at(e) >= limit {
				n++
			}
		}
		return n
	}
	if live(b) != live(o) {
		return false
	}
	for id, e := range b.byID {
		if b.at(e) < limit {
			continue
		}
		f, ok := o.byID[id]
		if !ok || o.at(f) < limit || !eq(e, f) {
			return false
		}
	}
	return true
}

// makeRoom drops expired ids (at most once per sweepEvery, or when full)
// and, when the map is still full, the longest idle tenth, so that a flood
// of new ids costs amortized O(log n) per id.
func (b *bounded[V]) makeRoom(now time.Time, expiration time.Duration, maxIDs int) {
	full := len(b.byID) >= maxIDs
	if !full && now.Sub(b.lastSweep) < sweepEvery {
		return
	}
	b.lastSweep = now
	limit := now.UnixMilli() - expiration.Milliseconds()
	for id, e := range b.byID {
		if b.at(e) < limit {
			delete(b.byID, id)
		}
	}
	if len(b.byID) < maxIDs {
		return
	}
	type idle struct{ id, last int64 }
	all := make([]idle, 0, len(b.byID))
	for id, e := range b.byID {
		all = append(all, idle{id, b.at(e)})
	}
	// Ties go by id, so that a follower replaying the leader's batches
	// evicts what a rebuild from its log does (producerlog.Replay).
	slices.SortFunc(all, func(x, y idle) int { return cmp.Or(cmp.Compare(x.last, y.last), cmp.Compare(x.id, y.id)) })
	drop := len(all) - maxIDs + 1 + maxIDs/10
	for _, x := range all[:min(drop, len(all))] {
		delete(b.byID, x.id)
	}
}
