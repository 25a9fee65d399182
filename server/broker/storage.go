package broker

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/runnel/runnel/segments"
)

// errStorage: a partition's log refuses writes after a write or fsync
// failed (disk full, I/O error). Both front doors map it in their one error
// table (HTTP 507, Kafka KAFKA_STORAGE_ERROR).
var ErrStorage = errors.New("storage error")

// maxStorageBackoff bounds the wait between two recovery attempts while a
// disk stays full.
const maxStorageBackoff = 30 * time.Second

// storageErr turns a log's sticky error into the message clients see: the
// partition and the system's reason, no file paths.
func storageErr(topic string, index int32, err error) error {
	return fmt.Errorf("%w on %s-%d: %s; writes resume by themselves once the disk takes them again",
		ErrStorage, topic, index, storageReason(err))
}

// storageReason is the system's reason for a storage error ("no space left
// on device"), without the paths the full error names.
func storageReason(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	return "I/O error"
}

// StorageHealth is what the storage loop last saw: the partitions whose log
// failed and the first one's error.
type StorageHealth struct {
	mu     sync.Mutex
	failed []string // "topic-partition", sorted
	cause  string   // storageReason of the first
	disk   error    // diskGuard.err: below --min-free-disk
}

func (h *StorageHealth) setDisk(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.disk = err
}

func (h *StorageHealth) set(failed []string, cause string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failed, h.cause = failed, cause
}

// Count is the number of failed partitions.
func (h *StorageHealth) Count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.failed)
}

// Err returns nil when no partition failed, otherwise an errStorage naming
// (a few of) them.
func (h *StorageHealth) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.failed) == 0 {
		return h.disk
	}
	names := h.failed
	more := ""
	if len(names) > 5 {
		names, more = names[:5], fmt.Sprintf(" and %d more", len(h.failed)-5)
	}
	return fmt.Errorf("%w: %d partition(s) refuse writes (%s%s): %s", ErrStorage, len(h.failed),
		strings.Join(names, ", "), more, h.cause)
}

// storageLoop watches the logs for a sticky storage error and recovers them
// in place once the disk takes writes again (segments.Log.Recover probes
// first), backing off while it does not. Started by start, stopped by close.
func (b *Broker) storageLoop(ctx context.Context, every time.Duration) {
	defer close(b.storageDone)
	backoff := every
	var next time.Time
	round := 0
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		b.disk.measure(true)
		failed := b.failedPartitions()
		if now := time.Now(); len(failed) > 0 && !now.Before(next) {
			round++
			if b.recoverPartitions(failed, round) {
				backoff = every
			} else {
				backoff = min(backoff*2, maxStorageBackoff)
				next = now.Add(backoff)
			}
			failed = b.failedPartitions()
		}
		b.publishStorage(failed)
		t.Reset(every)
	}
}

// failedPartitions returns the hosted partitions whose log has failed.
func (b *Broker) failedPartitions() []*Partition {
	var out []*Partition
	for _, p := range b.opened() { // an unopened log has not failed
		if p.log().Err() != nil {
			out = append(out, p)
		}
	}
	return out
}

// recoverPartitions tries to recover every failed log; it stops at the
// first failure (they share the disk) and reports whether all recovered.
// Each round starts at another partition, so one whose directory stays
// broken cannot keep the others from recovering.
func (b *Broker) recoverPartitions(failed []*Partition, round int) bool {
	start := round % len(failed)
	for _, p := range append(failed[start:len(failed):len(failed)], failed[:start]...) {
		if err := p.log().Recover(); err != nil {
			if errors.Is(err, segments.ErrClosed) {
				continue // deleted or moved meanwhile
			}
			b.logger.Warn("partition storage still failing; retrying", "topic", p.topic, "partition", p.index, "err", err)
			return false
		}
		p.recovered()
		b.logger.Info("partition storage recovered; writes accepted again", "topic", p.topic, "partition", p.index)
	}
	return true
}

func (b *Broker) publishStorage(failed []*Partition) {
	b.storage.setDisk(b.disk.err())
	if len(failed) == 0 {
		b.storage.set(nil, "")
		return
	}
	names := make([]string, len(failed))
	for i, p := range failed {
		names[i] = fmt.Sprintf("%s-%d", p.topic, p.index)
	}
	sort.Strings(names)
	b.storage.set(names, storageReason(failed[0].log().Err()))
}

// recovered is called after the log recovered in place: recovery may have
// cut an unacknowledged tail, so the high watermark must not pass the end.
func (p *Partition) recovered() {
	// The log is the truth again: idempotency keys of a cut batch must not
	// answer a retry, and a batch kept although its append failed (written,
	// then the fsync failed) must answer its producer's retry as a
	// duplicate. Both are rebuilt from the log at the next write.
	p.appendMu.Lock()
	p.producers = nil
	p.resetKeysLocked()
	p.appendMu.Unlock()
	end := p.log().EndOffset()
	for {
		hw := p.hwm.Load()
		if hw <= end || p.hwm.CompareAndSwap(hw, end) {
			break
		}
	}
	p.wake()
}
