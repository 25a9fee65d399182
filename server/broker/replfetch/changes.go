// Package replfetch is what a follower's fetcher keeps about one leader
// that needs no partition: the partitions it follows and which of them
// changed since its last round (Changes), and its side of the leader's
// KIP-227 fetch session, the positions the session holds and the requests
// that change them (Session, Request). server/broker's leaderFetcher
// (fetcher.go, fetchsession.go) holds one of each per leader, keyed by its
// partitions; so a round costs what changed, not what is followed
// (issue 19).
//
// Goroutines: none. Changes is safe for concurrent use (its mutex is a
// leaf: taken last, under the caller's locks, never held while calling
// out); a Session and its Requests belong to one goroutine.
package replfetch

import "sync"

// Changes is the partitions a fetcher follows, each with its state V, and
// those changed since the fetcher last collected them.
type Changes[K comparable, V any] struct {
	mu      sync.Mutex
	members map[K]V        // guarded by mu
	changed map[K]struct{} // guarded by mu
}

// Add follows k in state v (replacing its state if followed), changed.
func (c *Changes[K, V]) Add(k K, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.members == nil {
		c.members, c.changed = map[K]V{}, map[K]struct{}{}
	}
	c.members[k] = v
	c.changed[k] = struct{}{}
}

// Remove stops following k, changed, and reports whether it was followed.
func (c *Changes[K, V]) Remove(k K) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.members[k]
	if ok {
		delete(c.members, k)
		c.changed[k] = struct{}{}
	}
	return ok
}

// Touch marks k changed if it is followed, and reports whether it is.
func (c *Changes[K, V]) Touch(k K) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.members[k]
	if ok {
		c.changed[k] = struct{}{}
	}
	return ok
}

// Len is how many partitions are followed.
func (c *Changes[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.members)
}

// Get returns k's state and whether k is followed.
func (c *Changes[K, V]) Get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.members[k]
	return v, ok
}

// Keys returns the partitions followed.
func (c *Changes[K, V]) Keys() []K {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]K, 0, len(c.members))
	for k := range c.members {
		out = append(out, k)
	}
	return out
}

// Collect puts the partitions changed since the last Collect into work,
// each with its state (V's zero value: no longer followed), or, with all,
// makes work every partition followed. It returns len(work).
func (c *Changes[K, V]) Collect(work map[K]V, all bool) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if all {
		clear(work)
		for k, v := range c.members {
			work[k] = v
		}
	}
	for k := range c.changed {
		work[k] = c.members[k]
	}
	clear(c.changed)
	return len(work)
}
