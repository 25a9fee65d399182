// Package dirdelete deletes directories in the background, off the locks
// of whoever asks: the broker queues the logs of deleted replicas while it
// holds its main lock, which every produce and fetch takes, and a bounded
// workpool removes them. Until a queued directory is deleted, Wait(dir)
// blocks, so a new log of the same name is not opened over the old one.
//
// Goroutines: those of its workpool (at most the bound, started when work
// is queued, ending when the queue is empty); WaitAll waits for them. Lock
// order: Queue.mu is a leaf (Add may be called with any lock of the caller
// held); a deletion runs with no lock of this package held.
package dirdelete

import (
	"context"
	"sync"

	"github.com/runnel/runnel/server/broker/workpool"
)

// Queue is a queue of directory deletions.
type Queue struct {
	pool *workpool.Pool
	wg   sync.WaitGroup // the pool's goroutines

	mu      sync.Mutex
	pending map[string]chan struct{} // directory -> closed once deleted; guarded by mu
}

// New returns a queue running at most workers deletions at once (at
// least one).
func New(workers int) *Queue {
	q := &Queue{pending: map[string]chan struct{}{}}
	q.pool = workpool.New(context.Background(), &q.wg, max(workers, 1)) // never drops a deletion
	return q
}

// Add queues del, which deletes dir, and returns at once; done, if not
// nil, is called with del's error once it ran. Deletions of one
// directory run in the order they were added.
func (q *Queue) Add(dir string, del func() error, done func(error)) {
	ended := make(chan struct{})
	q.mu.Lock()
	after := q.pending[dir] // an earlier deletion of the same directory
	q.pending[dir] = ended
	q.mu.Unlock()
	q.pool.Do(func() {
		if after != nil {
			<-after // queued first, so started first: running or done
		}
		err := del()
		if done != nil {
			done(err)
		}
		q.mu.Lock()
		if q.pending[dir] == ended {
			delete(q.pending, dir)
		}
		q.mu.Unlock()
		close(ended)
	})
}

// Wait returns once no deletion of dir is queued or running.
func (q *Queue) Wait(dir string) {
	q.mu.Lock()
	ch := q.pending[dir]
	q.mu.Unlock()
	if ch != nil {
		<-ch
	}
}

// WaitAll returns once every deletion queued so far has run. Add must not
// be called while it waits (the broker stops queueing first).
func (q *Queue) WaitAll() { q.wg.Wait() }
