// Package dirdelete deletes directories in the background, off the locks
// of whoever asks: the broker queues the logs of deleted replicas while it
// holds its main lock, which every produce and fetch takes, and workers
// remove them. Until a queued directory is deleted, Wait(dir) blocks, so a
// new log of the same name is not opened over the old one.
//
// Goroutines: up to Queue.Workers, started by Add when work is queued and
// ending when the queue is empty; WaitAll waits for them. Lock order:
// Queue.mu is a leaf (Add may be called with any lock of the caller held);
// a deletion runs with no lock of this package held.
package dirdelete

import "sync"

// Queue is a queue of directory deletions. The zero value is ready: one
// worker at a time unless Workers says more.
type Queue struct {
	Workers int // at most this many deletions at once (0: 1)

	mu      sync.Mutex
	queue   []*deletion
	pending map[string]chan struct{} // directory -> closed once deleted
	running int
	wg      sync.WaitGroup
}

type deletion struct {
	dir   string
	del   func() error
	done  func(error)
	after chan struct{} // an earlier deletion of the same directory
	ended chan struct{}
}

// Add queues del, which deletes dir, and returns at once; done, if not
// nil, is called with del's error once it ran. Deletions of one
// directory run in the order they were added.
func (q *Queue) Add(dir string, del func() error, done func(error)) {
	d := &deletion{dir: dir, del: del, done: done, ended: make(chan struct{})}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.pending == nil {
		q.pending = map[string]chan struct{}{}
	}
	d.after = q.pending[dir]
	q.pending[dir] = d.ended
	q.queue = append(q.queue, d)
	if q.running < max(q.Workers, 1) {
		q.running++
		q.wg.Add(1)
		go q.work()
	}
}

func (q *Queue) work() {
	defer q.wg.Done()
	for {
		q.mu.Lock()
		if len(q.queue) == 0 {
			q.running--
			q.mu.Unlock()
			return
		}
		d := q.queue[0]
		q.queue[0] = nil
		q.queue = q.queue[1:]
		q.mu.Unlock()

		if d.after != nil {
			<-d.after
		}
		err := d.del()
		if d.done != nil {
			d.done(err)
		}
		q.mu.Lock()
		if q.pending[d.dir] == d.ended {
			delete(q.pending, d.dir)
		}
		q.mu.Unlock()
		close(d.ended)
	}
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

// WaitAll returns once every deletion queued so far has run (and the
// workers have ended, when nothing was added meanwhile).
func (q *Queue) WaitAll() { q.wg.Wait() }
