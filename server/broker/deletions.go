package broker

import (
	"sync"
)

// Deleting partition logs happens off Broker.mu. Reconcile holds that lock
// for writing, and every produce and fetch lookup takes it for reading, so
// deleting a large topic's logs under it (closing each open log, removing
// every segment file) stalled all traffic for as long. Under the lock,
// reconcile now only marks a deleted replica's Partition deleted (it never
// opens again) and queues its directory; up to maxDeleteWorkers goroutines
// delete the queued directories, closing an open log first. Until its
// directory is gone nothing opens or reads it again: a topic created again
// under the same name waits for the old directory's deletion (waitDeleted,
// in the log's open and directory look) instead of finding the old log.
//
// Goroutines: the workers, started on demand and exiting when the queue is
// empty; Close waits for them. Lock order: deletions.mu is a leaf, taken
// with Broker.mu held (queue) or alone.

// maxDeleteWorkers bounds the concurrent deletions (a few directories at
// once keep the filesystem busy without flooding it).
const maxDeleteWorkers = 4

type deletions struct {
	mu      sync.Mutex
	queue   []*deletion
	pending map[string]chan struct{} // directory -> closed once deleted
	workers int
	wg      sync.WaitGroup
}

// deletion is one queued directory: p's log when the partition was made
// (nil: a directory of a partition never made since the start).
type deletion struct {
	topic string
	idx   int32
	dir   string
	p     *Partition
	after chan struct{} // an earlier deletion of the same directory
	done  chan struct{}
}

// deleteLater queues the deletion of the log of topic's partition idx on
// this broker: p's (which is marked deleted now) or, with p nil, whatever
// directory a partition never made left. Called with b.mu held.
func (b *Broker) deleteLater(topic string, idx int32, p *Partition) {
	dir, err := b.partitionDir(topic, idx)
	if err != nil {
		b.logger.Warn("delete partition log", "topic", topic, "partition", idx, "err", err)
		return
	}
	if p != nil {
		p.lazy.deleted.Store(true)
	}
	d := &deletion{topic: topic, idx: idx, dir: dir, p: p, done: make(chan struct{})}
	q := &b.deletions
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.pending == nil {
		q.pending = map[string]chan struct{}{}
	}
	d.after = q.pending[dir]
	q.pending[dir] = d.done
	q.queue = append(q.queue, d)
	if q.workers < maxDeleteWorkers {
		q.workers++
		q.wg.Add(1)
		go b.deleteWorker()
	}
}

func (b *Broker) deleteWorker() {
	q := &b.deletions
	defer q.wg.Done()
	for {
		q.mu.Lock()
		if len(q.queue) == 0 {
			q.workers--
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
		var err error
		if d.p != nil {
			err = d.p.deleteLog()
		} else {
			err = b.fs().RemoveAll(d.dir)
		}
		if err != nil {
			// Left on disk: removed as a stray directory at the next
			// start, and replaced if the topic is created again (the
			// directory names its topic id).
			b.logger.Warn("delete partition log", "topic", d.topic, "partition", d.idx, "err", err)
		}
		q.mu.Lock()
		if q.pending[d.dir] == d.done {
			delete(q.pending, d.dir)
		}
		q.mu.Unlock()
		close(d.done)
	}
}

// waitDeleted returns once no deletion of dir is queued or running.
func (b *Broker) waitDeleted(dir string) {
	q := &b.deletions
	q.mu.Lock()
	ch := q.pending[dir]
	q.mu.Unlock()
	if ch != nil {
		<-ch
	}
}

// waitDeletions waits for every queued deletion (Close, tests).
func (b *Broker) waitDeletions() { b.deletions.wg.Wait() }
