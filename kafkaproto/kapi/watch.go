package kapi

import (
	"sync"
	"sync/atomic"
	"time"
)

// Fetch sessions that follow news instead of polling (issue 19). A fetch
// session (KIP-227) holds many partitions, most of them idle; a session's
// fetch should cost what its partitions with news cost, not what it holds.
// So the listener attaches a Watch to each partition of a session
// (PartitionWatcher.Watch) and the broker calls it when a fetch of that
// partition could answer something new; a session fetch reads only the
// partitions whose Watch fired since their last read (and those it was
// asked about), and a waiting one wakes only for its own news.
//
// A follower's session also stands for the follower's fetch position in
// every partition it holds, read or not: an incremental fetch that leaves
// a partition out means "still where I was". The session's FetchClock ticks
// at each of its fetches and each Watch carries the partition's position
// in the session, so the leader learns that the follower was still caught
// up in an idle partition (Watchers.CaughtUpAt) without reading it.

// PartitionWatcher is the optional part of a Broker that attaches fetch
// sessions' watches to partitions. A Broker without it serves fetch
// sessions as sessionless fetches (the client lists every partition in
// every request).
type PartitionWatcher interface {
	// Watch attaches w to the partition, moving it from where it was
	// attached before (a partition deleted and created again is another
	// one), so that w's notify is called after every later change a Fetch
	// of the partition could see: records appended, the high watermark,
	// last stable offset or log start moving, its leadership or leader
	// epoch changing, the partition going away. Called before each read
	// of the partition, so nothing between the two is missed. An error
	// (the partition is not hosted here) leaves w where it was.
	Watch(topic string, partition int32, w *Watch) error
}

// Watch is one fetch session's interest in one partition.
type Watch struct {
	notify  func()
	replica int32       // the follower's id; -1 for a client's session
	clock   *FetchClock // the follower session's clock; nil for a client's
	pos     atomic.Int64

	mu sync.Mutex
	on *Watchers // guarded by mu: where it is attached; nil: nowhere
}

// NewWatch returns a watch calling notify on news. notify runs on the
// goroutine that changed the partition, with the broker's locks held: it
// must not block or call the broker. replica and clock name a follower's
// session (replica -1 and clock nil: a client's).
func NewWatch(notify func(), replica int32, clock *FetchClock) *Watch {
	w := &Watch{notify: notify, replica: replica, clock: clock}
	w.pos.Store(-1)
	return w
}

// SetPosition records the session's fetch position in the partition.
func (w *Watch) SetPosition(offset int64) { w.pos.Store(offset) }

// Close detaches w: it is not called again.
func (w *Watch) Close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.on != nil {
		w.on.remove(w)
		w.on = nil
	}
}

// Watchers is the watches attached to one partition: a broker keeps one per
// partition and calls Notify at each change. The zero value is ready; it is
// safe for concurrent use.
type Watchers struct {
	mu   sync.Mutex
	list []*Watch
	// n is len(list), written under mu: Notify, on every append and
	// high-watermark move, returns without the lock when nothing
	// watches (most partitions).
	n atomic.Int32
}

// Attach attaches w here, detaching it from where it was.
func (ws *Watchers) Attach(w *Watch) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.on == ws {
		return
	}
	if w.on != nil {
		w.on.remove(w)
	}
	ws.mu.Lock()
	ws.list = append(ws.list, w)
	ws.n.Store(int32(len(ws.list)))
	ws.mu.Unlock()
	w.on = ws
}

func (ws *Watchers) remove(w *Watch) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for i, x := range ws.list {
		if x == w {
			last := len(ws.list) - 1
			ws.list[i], ws.list[last] = ws.list[last], nil
			ws.list = ws.list[:last]
			ws.n.Store(int32(len(ws.list)))
			if len(ws.list) == 0 {
				ws.list = nil // a partition nobody watches holds no array
			}
			return
		}
	}
}

// Len is how many watches are attached.
func (ws *Watchers) Len() int {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return len(ws.list)
}

// Notify tells every attached watch that the partition changed.
func (ws *Watchers) Notify() {
	if ws.n.Load() == 0 {
		return
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for _, w := range ws.list {
		w.notify()
	}
}

// CaughtUpAt is the last time a fetch session of follower replica fetched
// while its position in this partition was end (the leader's log end now,
// which does not move back on a leader: so the follower was caught up
// then too; a position past it is no position the leader credits); zero
// when none did.
func (ws *Watchers) CaughtUpAt(replica int32, end int64) time.Time {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	var at time.Time
	for _, w := range ws.list {
		if w.replica != replica || w.clock == nil || w.pos.Load() != end {
			continue
		}
		if t := w.clock.last(); t.After(at) {
			at = t
		}
	}
	return at
}

// Holds reports whether a live fetch session of follower replica holds
// this partition (its watch attached, its clock not stopped): only then
// can the follower's position here be credited without a fetch of the
// partition (CaughtUpAt). A session ends when its connection does (the
// follower died or restarted): its watches are detached then.
func (ws *Watchers) Holds(replica int32) bool {
	if ws.n.Load() == 0 {
		return false
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for _, w := range ws.list {
		if w.replica == replica && w.clock != nil && w.clock.nanos.Load() >= 0 {
			return true
		}
	}
	return false
}

// FetchClock is when a follower's fetch session last fetched; a closed
// session's clock stops.
type FetchClock struct {
	nanos atomic.Int64 // Unix nanoseconds; 0: never; -1: stopped
}

// Tick records a fetch at t.
func (c *FetchClock) Tick(t time.Time) {
	for {
		cur := c.nanos.Load()
		if cur < 0 || c.nanos.CompareAndSwap(cur, t.UnixNano()) {
			return
		}
	}
}

// Stop ends the clock: the session is gone, its positions stand for
// nothing any more.
func (c *FetchClock) Stop() { c.nanos.Store(-1) }

func (c *FetchClock) last() time.Time {
	if n := c.nanos.Load(); n > 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}
