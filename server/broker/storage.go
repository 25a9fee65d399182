package broker

import (
	"context"
	"time"

	"github.com/runnel/runnel/server/broker/storage"
)

// The partitions' side of a disk that stops taking writes: the reserve,
// the storage error, what the node reports and the recovery loop are
// package storage's; this file lists the failed logs for it and brings a
// partition in line with its log once the log recovered.

// ErrStorage: a partition's log refuses writes (storage.ErrStorage).
var ErrStorage = storage.ErrStorage

// StorageHealth is what the storage loop last saw (storage.Health).
type StorageHealth = storage.Health

// storageErr is the error clients see for a log's sticky error.
func storageErr(topic string, index int32, err error) error {
	return storage.PartitionErr(topic, index, err)
}

// storageLoop runs the recovery of failed logs (storage.Recovery) on its
// own goroutine. Started by Start, stopped by Close.
func (b *Broker) storageLoop(ctx context.Context, every time.Duration) {
	defer close(b.storageDone)
	r := storage.Recovery{Guard: b.disk, Health: b.storage, Logger: b.logger, Failed: b.failedPartitions}
	r.Run(ctx, every)
}

// failedPartitions returns the hosted partitions whose log has failed.
// A log lists itself in b.failed when it fails (segments.Options.OnFail,
// set by ensureOpen), whichever operation failed, so a look costs what
// failed, not what is open: asking each log changed lately for its error
// was a cache miss per log, 4% of a node's CPU at 300,000 written logs
// after a kill -9 (issue 19).
func (b *Broker) failedPartitions() []storage.Replica {
	var out []storage.Replica
	b.failed.each(func(p *Partition) bool {
		if gone := !b.open.has(p); gone || p.log().Err() == nil {
			b.dropFailed(p, gone)
			return true
		}
		out = append(out, failedReplica{p})
		return true
	})
	return out
}

// dropFailed takes p out of the failed logs, recovered or deleted (gone),
// unless it failed again meanwhile. The log's error is looked at under
// the set's lock: OnFail adds p under it after the error is set, so a
// failure after the look lists p again.
func (b *Broker) dropFailed(p *Partition, gone bool) {
	b.failed.mu.Lock()
	defer b.failed.mu.Unlock()
	if gone || p.log().Err() == nil {
		b.failed.removeLocked(p)
	}
}

// failedReplica is a partition as the recovery loop sees it.
type failedReplica struct{ *Partition }

func (f failedReplica) LogErr() error { return f.log().Err() }

func (f failedReplica) Recover() error {
	if err := f.log().Recover(); err != nil {
		return err
	}
	f.recovered()
	f.touchLog()
	return f.syncLoweredHWM() // the log may take records again
}

// recovered is called after the log recovered in place: recovery may have
// cut an unacknowledged tail, so the high watermark must not pass the end.
func (p *Partition) recovered() {
	// The log is the truth again: idempotency keys of a cut batch must not
	// answer a retry, and a batch kept although its append failed (written,
	// then the fsync failed) must answer its producer's retry as a
	// duplicate. Both are rebuilt from the log at the next write.
	p.appendMu.Lock()
	p.forgetProducersLocked()
	p.appendMu.Unlock()
	end := p.log().EndOffset()
	for {
		hw := p.hwm.Load()
		if hw <= end {
			break
		}
		if p.hwm.CompareAndSwap(hw, end) {
			p.hwmLowered.Store(true)
			p.hwmMoved()
			break
		}
	}
	p.repl.mu.Lock()
	p.markISRCheckLocked() // a follower at the lower mark may join
	p.repl.mu.Unlock()
	p.wake()
}
