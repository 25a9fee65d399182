package groups

import (
	"context"
	"fmt"
)

// A group's records reach its offsets partition through a queue, in the
// order of the in-memory changes they record, and without the group's lock:
// an append waits for the in-sync replicas (up to groupStoreTimeout), and
// heartbeats, fetches and the coordinator's timers must not wait behind it.
// One flusher goroutine at a time per group writes the queue; each write's
// done runs under the group's lock once it is written or failed, so memory
// follows the log: offsets are applied only after their records are
// written, and a failed group-metadata write is written again (the current
// state) at the next tick.

// groupWrite is one batch of a group's records.
type groupWrite struct {
	recs []Record
	meta bool            // the group's metadata record (metaDirty follows it)
	done func(err error) // under g.mu; may be nil
}

// enqueueLocked queues a write and starts the group's flusher if none runs.
func (g *group) enqueueLocked(w *groupWrite) {
	g.writes = append(g.writes, w)
	if g.flushing {
		return
	}
	if !g.c.goFlush(g) {
		g.writes = nil
		if w.done != nil {
			w.done(errGroupClosed)
		}
		return
	}
	g.flushing = true
}

// enqueueWaitLocked queues records and returns a channel receiving the
// write's outcome after apply (under g.mu) ran.
func (g *group) enqueueWaitLocked(recs []Record, apply func(err error)) <-chan error {
	ch := make(chan error, 1)
	g.enqueueLocked(&groupWrite{recs: recs, done: func(err error) {
		if apply != nil {
			apply(err)
		}
		ch <- err
	}})
	return ch
}

// goFlush starts a flusher of g unless the coordinator is closed.
func (c *Coordinator) goFlush(g *group) bool {
	c.flushMu.Lock()
	defer c.flushMu.Unlock()
	if c.flushClosed {
		return false
	}
	c.flushers.Add(1)
	go func() {
		defer c.flushers.Done()
		g.flush(c.life)
	}()
	return true
}

// flush writes the group's queue until it is empty.
func (g *group) flush(ctx context.Context) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for len(g.writes) > 0 {
		w := g.writes[0]
		g.mu.Unlock()
		err := g.c.appendRecords(ctx, g, w.recs)
		g.mu.Lock()
		g.writes = g.writes[1:]
		if w.meta {
			g.metaDirty = err != nil
		}
		if err != nil {
			g.c.logger.Warn("store group records", "group", g.name, "err", err)
		}
		if w.done != nil {
			w.done(err)
		}
	}
	g.flushing = false
}

// appendRecords appends records to the group's offsets partition as one
// batch (all or none), acks=all: it returns once the in-sync replicas hold
// it, so a commit that was acknowledged survives a coordinator failover.
func (c *Coordinator) appendRecords(ctx context.Context, g *group, recs []Record) error {
	ctx, cancel := context.WithTimeout(ctx, groupStoreTimeout)
	defer cancel()
	if err := c.b.Append(ctx, g.partition, recs); err != nil {
		if c.life.Err() != nil {
			return fmt.Errorf("store group %s: %w", g.name, errGroupClosed)
		}
		return fmt.Errorf("store group %s: %w", g.name, err)
	}
	return nil
}

// retryPersistLocked writes the group's metadata again when its last write
// failed and nothing newer is queued; called by the tick.
func (g *group) retryPersistLocked() {
	if g.metaDirty && !g.flushing && (g.state == stateStable || g.state == stateEmpty) {
		g.persistLocked(nil)
	}
}
