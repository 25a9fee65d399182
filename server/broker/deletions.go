package broker

// Deleting partition logs happens off Broker.mu. Reconcile holds that lock
// for writing, and every produce and fetch lookup takes it for reading, so
// deleting a large topic's logs under it (closing each open log, removing
// every segment file) stalled all traffic for as long. Under the lock,
// reconcile now only marks a deleted replica's Partition deleted (it never
// opens again) and queues its directory; the queue's workpool (dirdelete)
// delete it, closing an open log first. Until its directory is gone
// nothing opens or reads it again: a topic created again under the same
// name waits for the old directory's deletion (waitDeleted, in the log's
// open and directory look) instead of finding the old log.

// maxDeleteWorkers bounds the concurrent deletions (a few directories at
// once keep the filesystem busy without flooding it).
const maxDeleteWorkers = 4

// deleteLater queues the deletion of the log of topic's partition idx on
// this broker: p's (which is marked deleted now) or, with p nil, whatever
// directory a partition never made left. Called with b.mu held.
func (b *Broker) deleteLater(topic string, idx int32, p *Partition) {
	dir, err := b.partitionDir(topic, idx)
	if err != nil {
		b.logger.Warn("delete partition log", "topic", topic, "partition", idx, "err", err)
		return
	}
	del := func() error { return b.fs().RemoveAll(dir) }
	if p != nil {
		p.lazy.deleted.Store(true)
		del = p.deleteLog // takes p's lazyLog.mu: never under b.mu
	}
	remove := del
	del = func() error {
		err := remove()
		b.hwms.forget(topic, idx) // its log is no longer open: the next checkpoint drops it
		return err
	}
	b.deletions.Add(dir, del, func(err error) {
		if err != nil {
			// Left on disk: removed as a stray directory at the next
			// start, and replaced if the topic is created again (the
			// directory records its topic id: logdir.go).
			b.logger.Warn("delete partition log", "topic", topic, "partition", idx, "err", err)
		}
	})
}

// waitDeleted returns once no deletion of dir is queued or running.
func (b *Broker) waitDeleted(dir string) { b.deletions.Wait(dir) }

// waitDeletions waits for every queued deletion (Close, tests).
func (b *Broker) waitDeletions() { b.deletions.WaitAll() }
