package broker

import (
	"log/slog"
	"sync"

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

// producerRebuilds runs the background rebuilds of a fetch manager.
type producerRebuilds struct {
	pool   *workpool.Pool // one goroutine, of the manager's wait group
	logger *slog.Logger
	mu     sync.Mutex
	// queued are the partitions with a rebuild queued or running
	// (guarded by mu, a leaf).
	queued map[*Partition]bool
}

func newProducerRebuilds(m *fetchManager) *producerRebuilds {
	return &producerRebuilds{pool: workpool.New(m.ctx, &m.wg, 1), logger: m.logger, queued: map[*Partition]bool{}}
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
	r.queued[p] = true
	r.pool.Do(func() {
		if err := p.producersErr(p.producers.Load(&p.appendMu, p.log(), p.policy(), p.wallNow())); err != nil {
			r.logger.Debug("rebuild producer state", "topic", p.topic, "partition", p.index, "err", err)
		}
		r.mu.Lock()
		delete(r.queued, p)
		r.mu.Unlock()
	})
}
