package broker

import (
	"log/slog"
	"sync"
	"time"

	"github.com/runnel/runnel/server/broker/workpool"
)

// A follower keeps its producer table as it copies the leader's batches
// (followProducersLocked), but a log it opened with batches in it (after a
// restart) or truncated has none until one is rebuilt from the log. That
// rebuild is paid here, in the background, once such a follower appends
// new batches (a partition in use: an idle one is left to its first write
// as leader) while it is in the ISR (only an in-sync replica can be
// elected, and a restarted broker catching up on thousands of partitions
// has its disk for that), so that a kill -9 of its leader finds its table
// loaded.
//
// Not on the apply path: a rebuild reads up to the producer expiration's
// worth of the log, and the partition's apply would hold up its next fetch
// (and the leader's acks=all writes waiting for it) meanwhile; with
// thousands of partitions to rebuild after a restart, the apply pool
// would be theirs. So rebuilds run one at a time on a pool of their own,
// the bulk of each read without appendMu (producerlog.Table.Load), and a
// follower's appends, a truncation or leadership meanwhile are settled by
// the load (an append is read under the lock at its end, a truncation has
// the read done again, a leader's write that loads it first wins).
//
// A rebuild that fails (its log's reads fail) is not queued again at the
// partition's next apply, which would read the log again on every fetch
// bringing it batches and hold the other partitions' rebuilds up behind
// it: it waits rebuildRetryMin, twice that after the next failure, and so
// on up to rebuildRetryMax. A rebuild that succeeds forgets the failures.

// The bounds of the delay before a failed rebuild is tried again.
const (
	rebuildRetryMin = time.Second
	rebuildRetryMax = time.Minute
)

// producerRebuilds runs the background rebuilds of a fetch manager.
type producerRebuilds struct {
	pool   *workpool.Pool // one goroutine, of the manager's wait group
	logger *slog.Logger
	mu     sync.Mutex
	// queued are the partitions with a rebuild queued or running
	// (guarded by mu, a leaf).
	queued map[*Partition]bool
	// failed are the partitions whose last rebuild failed, with when it
	// may be tried again (guarded by mu). An entry is dropped when a
	// rebuild succeeds, and forgotten (with its doubling) once it has not
	// been retried for rebuildRetryMax past its time or its log was closed:
	// a partition deleted or moved meanwhile is not kept.
	failed map[*Partition]rebuildRetry
	// swept is when failed was last swept of those (guarded by mu): at
	// most once per rebuildRetryMin, so that thousands of partitions
	// failing at once (a broken disk) cost no sweep per rebuild.
	swept time.Time
	// load rebuilds p's table (rebuildProducers; tests fake a failing
	// one) and now is the clock of the retries (time.Now; tests move it).
	load func(p *Partition) error
	now  func() time.Time
}

// rebuildRetry is when a failed rebuild may be tried again, and the delay
// that led there (the next failure's doubles it).
type rebuildRetry struct {
	at    time.Time
	delay time.Duration
}

func newProducerRebuilds(m *fetchManager) *producerRebuilds {
	return &producerRebuilds{pool: workpool.New(m.ctx, &m.wg, 1), logger: m.logger,
		queued: map[*Partition]bool{}, failed: map[*Partition]rebuildRetry{},
		load: rebuildProducers, now: time.Now}
}

// rebuildProducers loads p's producer table from its log.
func rebuildProducers(p *Partition) error {
	return p.producersErr(p.producers.Load(&p.appendMu, p.log(), p.policy(), p.wallNow()))
}

// after is called once a follower applied fetched batches to p: it queues
// the rebuild of p's producer table if the table is not loaded.
func (r *producerRebuilds) after(p *Partition) {
	if !p.producersUnknown() || !p.inISR(p.repl.self) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.queued[p] {
		return
	}
	if f, ok := r.failed[p]; ok && r.now().Before(f.at) {
		return
	}
	r.queued[p] = true
	r.pool.Do(func() {
		err := r.load(p)
		r.mu.Lock()
		delete(r.queued, p)
		retryIn := r.settleLocked(p, err)
		r.mu.Unlock()
		if err != nil {
			r.logger.Debug("rebuild producer state", "topic", p.topic, "partition", p.index, "err", err, "retry_in", retryIn)
		}
	})
}

// settleLocked records how p's rebuild ended: a failure sets when it may
// be tried again (returning the delay), a success forgets p's failures.
// It also forgets the failures of partitions no longer retried (see
// failed). mu is held.
func (r *producerRebuilds) settleLocked(p *Partition, err error) time.Duration {
	now := r.now()
	if now.Sub(r.swept) >= rebuildRetryMin {
		r.swept = now
		for q, f := range r.failed {
			if q.log() == nil || now.Sub(f.at) > rebuildRetryMax {
				delete(r.failed, q)
			}
		}
	}
	if err == nil {
		delete(r.failed, p)
		return 0
	}
	delay := rebuildRetryMin
	if f, ok := r.failed[p]; ok {
		delay = min(2*f.delay, rebuildRetryMax)
	}
	r.failed[p] = rebuildRetry{at: now.Add(delay), delay: delay}
	return delay
}
