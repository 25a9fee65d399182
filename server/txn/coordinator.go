package txn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"
	"unicode/utf16"

	"github.com/runnel/runnel/kafkaproto"
)

// Defaults of Config's limits (Kafka's names and values).
const (
	DefaultMaxTimeout   = 15 * time.Minute   // transaction.max.timeout.ms
	DefaultIDExpiration = 7 * 24 * time.Hour // transactional.id.expiration.ms
	// tick is how often timeouts and expiry are checked (Kafka's
	// transaction.abort.timed.out.transaction.cleanup.interval.ms is 10 s).
	tick = time.Second
	// markerRetry is the pause between attempts to write markers that
	// failed (a partition without a leader, a broker down).
	markerRetry = 200 * time.Millisecond
	// endWait bounds how long EndTxn waits for its markers before
	// answering: the outcome is decided once PrepareCommit/PrepareAbort
	// is stored, so a slow partition delays the answer by at most this.
	endWait = 5 * time.Second
)

// StateLog is __transaction_state as the coordinator uses it. Safe for
// concurrent use.
type StateLog interface {
	// Append appends one record to partition p (led by this broker) with
	// acks=all: it returns once the in-sync replicas hold it or ctx ends.
	// Errors wrap kafkaproto.ErrNotCoordinator (the partition moved) or
	// kafkaproto.ErrCoordinatorNotAvailable (too few replicas, timeout).
	Append(ctx context.Context, p int32, key, value []byte) error
	// Load calls fn for every record of partition p from its start to
	// its end (value nil: a tombstone), once the partition's high
	// watermark has reached its log end.
	Load(ctx context.Context, p int32, fn func(key, value []byte)) error
}

// Marker ends a producer's transaction in the partitions it is written to.
type Marker struct {
	ProducerID int64
	Epoch      int16
	Commit     bool
	// CoordinatorEpoch is the leader epoch of the coordinator's
	// __transaction_state partition: partitions refuse markers of an older
	// coordinator.
	CoordinatorEpoch int32
}

// MarkerWriter writes markers. Safe for concurrent use.
type MarkerWriter interface {
	// WriteMarkers writes m into each partition (wherever its leader is)
	// and returns one error per partition, nil where it is written. A
	// partition of __consumer_offsets stands for the staged offsets of
	// the groups it holds. The coordinator retries failed partitions.
	WriteMarkers(ctx context.Context, m Marker, parts []TopicPartition) []error
}

// Cluster is what the coordinator asks of the rest of the broker. Safe
// for concurrent use.
type Cluster interface {
	// AllocateProducerID returns a producer id never handed out before.
	AllocateProducerID(ctx context.Context) (int64, error)
	// PartitionExists reports whether the topic partition exists.
	PartitionExists(t TopicPartition) bool
	// GroupPartition returns the __consumer_offsets partition holding
	// group's offsets.
	GroupPartition(ctx context.Context, group string) (TopicPartition, error)
}

// Config configures a Coordinator.
type Config struct {
	Log     StateLog
	Markers MarkerWriter
	Cluster Cluster
	// MaxTimeout is the largest transaction timeout a producer may ask
	// for (0: DefaultMaxTimeout).
	MaxTimeout time.Duration
	// IDExpiration forgets an id idle this long (0: DefaultIDExpiration).
	IDExpiration time.Duration
	Logger       *slog.Logger
	Now          func() time.Time // nil: time.Now
}

// Errors the coordinator answers with besides the kafkaproto sentinels.
var (
	errNotCoordinator = fmt.Errorf("%w: this broker does not coordinate the transactional id", kafkaproto.ErrNotCoordinator)
	errLoading        = fmt.Errorf("%w: loading the transactional id's partition", kafkaproto.ErrCoordinatorLoading)
	errClosed         = fmt.Errorf("%w: coordinator shutting down", kafkaproto.ErrCoordinatorNotAvailable)
)

// Coordinator coordinates the transactional ids of the __transaction_state
// partitions this broker leads.
type Coordinator struct {
	cfg    Config
	logger *slog.Logger
	now    func() time.Time

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // run, loads and completions

	mu     sync.Mutex
	n      int32            // partitions of __transaction_state; guarded by mu
	shards map[int32]*shard // partitions led here; guarded by mu
	closed bool             // guarded by mu
}

// shard is one __transaction_state partition led by this broker.
type shard struct {
	p      int32
	epoch  int32 // its leader epoch: the coordinator epoch of markers
	loaded bool
	txns   map[string]*entry // guarded by Coordinator.mu
	ctx    context.Context   // cancelled when the shard is unloaded
	cancel context.CancelFunc
}

// entry is one transactional id.
type entry struct {
	id string
	sh *shard

	mu         sync.Mutex
	meta       Meta          // guarded by mu
	removed    bool          // expired; guarded by mu (unloaded: sh.ctx is done)
	completing chan struct{} // closed when the markers of a Prepare* state are written; guarded by mu
}

// New returns a coordinator that leads no partition yet.
func New(cfg Config) *Coordinator {
	if cfg.MaxTimeout <= 0 {
		cfg.MaxTimeout = DefaultMaxTimeout
	}
	if cfg.IDExpiration <= 0 {
		cfg.IDExpiration = DefaultIDExpiration
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Coordinator{cfg: cfg, logger: cfg.Logger, now: cfg.Now, ctx: ctx, cancel: cancel, shards: map[int32]*shard{}}
}

// Start starts the timer goroutine (timeouts, expiry).
func (c *Coordinator) Start() {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		t := time.NewTicker(tick)
		defer t.Stop()
		for {
			select {
			case <-c.ctx.Done():
				return
			case <-t.C:
				c.Tick()
			}
		}
	}()
}

// Close stops every goroutine; later requests answer
// COORDINATOR_NOT_AVAILABLE.
func (c *Coordinator) Close() {
	c.mu.Lock()
	c.closed = true
	for p := range c.shards {
		c.unloadLocked(p)
	}
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
}

// Follow tells the coordinator that __transaction_state has n partitions
// and that this broker leads those in led (partition -> leader epoch).
// Partitions newly led (or led in a new epoch) are loaded in the
// background; the others are dropped. Safe for concurrent use.
func (c *Coordinator) Follow(n int32, led map[int32]int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.n = n
	for p, sh := range c.shards {
		if e, ok := led[p]; !ok || e != sh.epoch {
			c.unloadLocked(p)
		}
	}
	for p, e := range led {
		if _, ok := c.shards[p]; ok {
			continue
		}
		ctx, cancel := context.WithCancel(c.ctx)
		sh := &shard{p: p, epoch: e, txns: map[string]*entry{}, ctx: ctx, cancel: cancel}
		c.shards[p] = sh
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.load(sh)
		}()
	}
}

// unloadLocked drops a shard: its completions stop, its entries are
// forgotten (the next leader loads them). Entries see it through the
// shard's cancelled context (their locks may be held across an append).
func (c *Coordinator) unloadLocked(p int32) {
	sh := c.shards[p]
	delete(c.shards, p)
	sh.cancel()
	if sh.loaded {
		c.logger.Info("no longer coordinating transactions of partition", "partition", p)
	}
}

// load reads a shard's partition and resumes the transactions that were
// ending. A failed load is retried until the shard is unloaded.
func (c *Coordinator) load(sh *shard) {
	for attempt := 0; ; attempt++ {
		start := c.now()
		txns := map[string]Meta{}
		err := c.cfg.Log.Load(sh.ctx, sh.p, func(k, v []byte) {
			id, err := decodeKey(k)
			if err != nil {
				c.logger.Warn("skipping __transaction_state record", "partition", sh.p, "err", err)
				return
			}
			if v == nil {
				delete(txns, id)
				return
			}
			m, err := decodeValue(v)
			if err != nil {
				c.logger.Warn("skipping __transaction_state record", "partition", sh.p, "id", id, "err", err)
				return
			}
			txns[id] = m
		})
		if err == nil {
			c.install(sh, txns, start)
			return
		}
		if attempt%25 == 0 {
			c.logger.Warn("load __transaction_state partition", "partition", sh.p, "err", err)
		}
		select {
		case <-sh.ctx.Done():
			return
		case <-time.After(markerRetry):
		}
	}
}

// install makes a loaded shard serve, and completes what was ending.
func (c *Coordinator) install(sh *shard, txns map[string]Meta, start time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.shards[sh.p] != sh {
		return // unloaded meanwhile
	}
	for id, m := range txns {
		e := &entry{id: id, sh: sh, meta: m}
		sh.txns[id] = e
		if m.State.preparing() {
			e.mu.Lock()
			c.startCompleteLocked(e)
			e.mu.Unlock()
		}
	}
	sh.loaded = true
	c.logger.Info("coordinating transactions of partition", "partition", sh.p, "epoch", sh.epoch,
		"ids", len(txns), "load", c.now().Sub(start).Round(time.Millisecond))
}

// Partition is the __transaction_state partition of id among n: Kafka's
// abs(id.hashCode()) % n.
func Partition(id string, n int32) int32 {
	var h int32
	for _, u := range utf16.Encode([]rune(id)) {
		h = 31*h + int32(u)
	}
	if h == -1<<31 {
		h = 0
	} else if h < 0 {
		h = -h
	}
	return h % n
}

// lookup returns the entry of id when this broker coordinates it; create
// makes an empty one (not stored yet) when there is none.
func (c *Coordinator) lookup(id string, create bool) (*entry, error) {
	if id == "" {
		return nil, fmt.Errorf("%w: empty transactional id", kafkaproto.ErrInvalidRequest)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errClosed
	}
	if c.n <= 0 {
		return nil, errNotCoordinator
	}
	sh, ok := c.shards[Partition(id, c.n)]
	switch {
	case !ok:
		return nil, errNotCoordinator
	case !sh.loaded:
		return nil, errLoading
	}
	e, ok := sh.txns[id]
	if !ok && create {
		e = &entry{id: id, sh: sh, meta: Meta{ProducerID: -1, Epoch: -1, LastProducerID: -1, LastEpoch: -1, StartMS: -1}}
		sh.txns[id] = e
	}
	if !ok && !create {
		return nil, fmt.Errorf("%w: %s", kafkaproto.ErrTransactionalIDNotFound, id)
	}
	return e, nil
}

// storeLocked appends m as id's record and makes it current.
func (c *Coordinator) storeLocked(ctx context.Context, e *entry, m Meta) error {
	if e.removed || e.sh.ctx.Err() != nil {
		return errNotCoordinator
	}
	m.UpdateMS = c.now().UnixMilli()
	if err := c.cfg.Log.Append(ctx, e.sh.p, encodeKey(e.id), encodeValue(m)); err != nil {
		return err
	}
	e.meta = m
	return nil
}

// entries returns every loaded entry, sorted by id.
func (c *Coordinator) entries() []*entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*entry
	for _, sh := range c.shards {
		if !sh.loaded {
			continue
		}
		for _, e := range sh.txns {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// forget removes e from its shard (after its tombstone is stored).
func (c *Coordinator) forget(e *entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.sh.txns[e.id] == e {
		delete(e.sh.txns, e.id)
	}
}

// isCtxErr reports a context's end.
func isCtxErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

func isNotFound(err error) bool { return errors.Is(err, kafkaproto.ErrTransactionalIDNotFound) }
