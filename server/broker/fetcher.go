package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/runnel/runnel/server/broker/kafkaconn"
	"github.com/runnel/runnel/server/broker/replfetch"
	"github.com/runnel/runnel/server/broker/storage"
	"github.com/runnel/runnel/server/broker/workpool"
)

// Followers pull from leaders: one goroutine and one connection per leader
// broker, fetching every partition this broker follows from it in one
// long-polling Kafka Fetch (ReplicaID = this broker). Before a partition's
// first fetch from a new leader, its log is truncated to where it diverged
// from the leader's (OffsetForLeaderEpoch), so an unacknowledged tail from an
// older leader never survives. What a fetch brings is applied, and a log
// the check needs is opened, on a pool of goroutines, not in the loop
// (fetchapply.go).

const (
	replicaFetchWait     = 500 * time.Millisecond
	replicaFetchMaxBytes = 16 << 20
	replicaPartitionMax  = 4 << 20
	replicaRetryBackoff  = 100 * time.Millisecond
)

type fetchManager struct {
	self   int32
	dial   func(ctx context.Context, leader int32) (net.Conn, error)
	logger *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	disk *storage.Guard // a low disk fetches nothing (readyToFetch)

	// pool applies fetched answers for every leader's fetcher; a round
	// waits applyWait for its applies. opens opens the logs the fetchers
	// check against their leaders (fetchapply.go).
	pool      *workpool.Pool
	opens     *workpool.Pool
	applyWait time.Duration
	// rebuilds rebuilds the producer tables of followed partitions in
	// the background (producerrebuild.go).
	rebuilds *producerRebuilds

	mu       sync.Mutex
	byLeader map[int32]*leaderFetcher // guarded by mu

	stats fetchStats
}

// fetchStats counts what the fetchers did, for all leaders: the
// requests they sent, the partitions listed and answered, and where a
// round's time went (building its request, waiting for the leader's
// answer, waiting for its applies). Benchmarks read them
// (Broker.ReplicaFetchStats) to tell how many rounds a catch-up took.
type fetchStats struct {
	requests, listed, answered          atomic.Int64
	buildNanos, answerNanos, applyNanos atomic.Int64
}

// ReplicaFetchStats is what fetchStats counted so far.
type ReplicaFetchStats struct {
	Requests, Listed, Answered int64
	Build, Answer, ApplyWait   time.Duration
}

// ReplicaFetchStats reports what this broker's fetchers did so far.
func (b *Broker) ReplicaFetchStats() ReplicaFetchStats {
	s := &b.fetches.stats
	return ReplicaFetchStats{Requests: s.requests.Load(), Listed: s.listed.Load(), Answered: s.answered.Load(),
		Build: time.Duration(s.buildNanos.Load()), Answer: time.Duration(s.answerNanos.Load()), ApplyWait: time.Duration(s.applyNanos.Load())}
}

// leaderFetcher replicates the partitions led by one broker.
//
// A round looks only at the partitions that changed since they were last
// looked at (issue 19: building each request looked at every followed
// partition, most of a 3-node cluster's idle CPU at 30,000 partitions):
// those added or removed, and those whose Partition.wake ran (records
// applied, truncated, log start or epoch moved, log recovered) or whose
// apply or open on the pool ended. They stay in work until settled: the
// session holds them where they are, they are busy on the pool, or they
// wait for the disk. The others (waiting for the leader's epochs, a failed
// log) are looked at each round, as every partition was before. A new
// session, a leader keeping none, and a change of the disk's state look at
// every partition.
type leaderFetcher struct {
	m      *fetchManager
	leader int32
	poke   chan struct{} // buffered(1): the partition set changed

	parts replfetch.Changes[*Partition, *followState] // followed, and changed since collected

	// The run goroutine's own: the session, the partitions this round
	// looks at (nil state: no longer followed here) and the disk's state
	// when they were collected.
	session replfetch.Session[*Partition, *followState]
	work    map[*Partition]*followState
	answer  *fetchAnswer   // the last round's, reused once its applies are done (fetchapply.go)
	retired []*fetchAnswer // earlier rounds' whose applies ran late, reused once done (nextAnswer)
	lowDisk bool
	looked  int // partitions the rounds looked at, summed (tests count it)

	// Epochs asked in the background (fetchepochs.go): its answers, nil
	// when none runs; and how many partitions one request asks about
	// (maxEpochAsks; tests make it small).
	epochs         chan epochBatch
	asksPerRequest int
}

type followState struct {
	truncated bool // the log was checked against the leader's epochs
	asking    bool // its epochs are being asked in the background
}

func newLeaderFetcher(m *fetchManager, leader int32) *leaderFetcher {
	return &leaderFetcher{m: m, leader: leader, poke: make(chan struct{}, 1), work: map[*Partition]*followState{},
		asksPerRequest: maxEpochAsks}
}

func newFetchManager(self int32, dial func(context.Context, int32) (net.Conn, error), disk *storage.Guard, logger *slog.Logger) *fetchManager {
	ctx, cancel := context.WithCancel(context.Background())
	m := &fetchManager{self: self, dial: dial, disk: disk, logger: logger, ctx: ctx, cancel: cancel, byLeader: map[int32]*leaderFetcher{},
		applyWait: replicaApplyWait}
	m.pool = workpool.New(ctx, &m.wg, replicaApplyWorkers)
	m.opens = workpool.New(ctx, &m.wg, replicaOpenWorkers)
	m.rebuilds = newProducerRebuilds(m)
	return m
}

// follow makes p replicate from its current leader, or stop replicating
// when this broker leads it (or nobody does). Non-blocking.
func (m *fetchManager) follow(p *Partition) {
	leader := p.leader.Load()
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, f := range m.byLeader {
		if id != leader {
			f.remove(p)
		}
	}
	if leader < 0 || leader == m.self || m.ctx.Err() != nil {
		return
	}
	f, ok := m.byLeader[leader]
	if !ok {
		f = newLeaderFetcher(m, leader)
		m.byLeader[leader] = f
		m.wg.Add(1)
		go f.run()
	}
	f.add(p)
}

// forget stops replicating p (its topic was deleted).
func (m *fetchManager) forget(p *Partition) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, f := range m.byLeader {
		f.remove(p)
	}
}

func (m *fetchManager) close() {
	m.cancel()
	m.wg.Wait()
}

func (f *leaderFetcher) add(p *Partition) {
	f.parts.Add(p, &followState{}) // a new leader or epoch: check divergence again
	p.follower.Store(f)
	f.wake()
}

func (f *leaderFetcher) remove(p *Partition) {
	p.follower.CompareAndSwap(f, nil)
	if f.parts.Remove(p) { // the session forgets it
		f.wake()
	}
}

// touch makes the next round look at p again: it changed. Called by
// Partition.wake, with the partition's locks held (f.parts' is a leaf).
func (f *leaderFetcher) touch(p *Partition) {
	if f.parts.Touch(p) {
		f.wake()
	}
}

func (f *leaderFetcher) wake() {
	select {
	case f.poke <- struct{}{}:
	default:
	}
}

// collect adds the partitions changed since the last round to work, or
// every partition when the round must look at all of them: the request
// opens a session or the leader keeps none (a full request lists every
// ready partition), or the disk's state changed (readyToFetch).
func (f *leaderFetcher) collect() {
	low := f.m.disk.IsLow()
	full := f.session.Full() || low != f.lowDisk
	f.lowDisk = low
	f.looked += f.parts.Collect(f.work, full)
}

func (f *leaderFetcher) run() {
	defer f.m.wg.Done()
	var conn *kafkaconn.Conn
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	for f.m.ctx.Err() == nil {
		if f.parts.Len() == 0 {
			select {
			case <-f.poke:
			case <-f.m.ctx.Done():
			}
			continue
		}
		if conn == nil {
			c, err := f.connect()
			if err != nil {
				f.m.logger.Debug("dial partition leader", "leader", f.leader, "err", err)
				f.sleep(replicaRetryBackoff)
				continue
			}
			conn = c
		}
		if err := f.round(conn); err != nil {
			if f.m.ctx.Err() == nil {
				f.m.logger.Debug("replica fetch", "leader", f.leader, "err", err)
			}
			conn.Close()
			conn = nil
			f.session.Reset() // the leader's session lived in that connection
			f.sleep(replicaRetryBackoff)
		}
	}
}

// connect dials the leader: a connection Close ends, with a request in
// flight at once.
func (f *leaderFetcher) connect() (*kafkaconn.Conn, error) {
	c, err := f.m.dial(f.m.ctx, f.leader)
	if err != nil {
		return nil, err
	}
	conn := kafkaconn.New(c, fmt.Sprintf("runnel-replica-%d", f.m.self))
	conn.Watch(f.m.ctx)
	return conn, nil
}

// round is one fetch round: the changed partitions are collected, those
// new to this leader checked against its epochs, and the rest fetched.
func (f *leaderFetcher) round(conn *kafkaconn.Conn) error {
	f.collect()
	if err := f.truncate(conn); err != nil {
		return err
	}
	return f.fetch(conn)
}

func (f *leaderFetcher) sleep(d time.Duration) {
	select {
	case <-time.After(d):
	case <-f.poke:
	case <-f.m.ctx.Done():
	}
}

var errRetryLater = errors.New("retry later")

// applyFetched applies one partition's answer to a fetch sent at position
// sent. An answer from a leader the metadata has replaced since is dropped
// whole (appendAsFollower says why), and so are records answering a fetch
// at a position the log has moved past: an earlier answer brought them
// (Kafka's fetcher drops an answer whose fetch offset is no longer the
// log end, too). Appended, they failed ("base offset 1 below 2") and the
// partition checked its divergence from the leader again before fetching
// on (issue 19).
func (f *leaderFetcher) applyFetched(p *Partition, st *followState, rp *kmsg.FetchResponseTopicPartition, sent replfetch.Pos) error {
	fetchEpoch := sent.LeaderEpoch
	if p.leaderEpoch.Load() != fetchEpoch {
		return nil
	}
	if base, empty := unopenedEmpty(p); empty {
		switch {
		case rp.ErrorCode != 0 && rp.ErrorCode != kerr.OffsetOutOfRange.Code:
			return errRetryLater // as below, without opening the log
		case rp.ErrorCode == 0 && len(rp.RecordBatches) == 0 && rp.HighWatermark <= base && rp.LogStartOffset <= base:
			return nil // nothing to store: the log stays unopened
		}
		if err := p.ensureOpen(); err != nil {
			return err
		}
	}
	switch err := kerr.ErrorForCode(rp.ErrorCode); {
	case err == nil:
	case errors.Is(err, kerr.OffsetOutOfRange):
		if p.log().EndOffset() < rp.LogStartOffset {
			// The leader deleted what we miss (retention): start over at its log start.
			return p.resetAsFollower(rp.LogStartOffset, fetchEpoch)
		}
		st.truncated = false
		return nil
	default:
		// Not leader, fenced epoch, unknown partition: the metadata will move us.
		return errRetryLater
	}
	if len(rp.RecordBatches) > 0 && p.log().EndOffset() != sent.Offset {
		return nil // stale: this log holds them already (see above)
	}
	if err := p.appendAsFollower(rp.RecordBatches, fetchEpoch); err != nil {
		if errors.Is(err, errDiverged) {
			st.truncated = false
			return nil
		}
		return err
	}
	p.followerLearned(rp.HighWatermark, rp.LogStartOffset)
	return nil
}
