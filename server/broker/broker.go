package broker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/runnel/runnel/raftfsm"
	"github.com/runnel/runnel/segments"
	"github.com/runnel/runnel/server/broker/dirdelete"
	"github.com/runnel/runnel/server/broker/producers"
	"github.com/runnel/runnel/server/broker/readbuf"
	"github.com/runnel/runnel/server/broker/storage"

	"github.com/runnel/runnel/segments/vfs"
)

// Broker hosts partition replicas: it follows the metadata image, opens the
// logs of the partitions placed on it, removes those of deleted topics, and
// serves produce and read for both front doors.
//
// Goroutines: run (metadata follower + maintenance), isrLoop and storageLoop
// (recovery of logs whose disk failed) are started by start and stopped by
// close.
type Broker struct {
	id      int32
	dir     string // <data-dir>/partitions
	meta    Metadata
	logOpts segments.Options
	logger  *slog.Logger

	fetches       *fetchManager // follower replication
	replicaLagMax time.Duration
	storageRetry  time.Duration  // storageLoop's first retry interval
	storage       *StorageHealth // what storageLoop last saw (shared with Server)
	maxInflated   int64          // segments.Config.MaxInflatedBytes
	framingOnly   bool           // segments.Config.FramingOnly (benchmark baseline)
	// logIdleTimeout: files unused this long are closed (lazylog.go).
	logIdleTimeout time.Duration
	// hwms is the partitions directory's high-watermark checkpoint
	// (hwmcheckpoint.go), written every hwmEvery.
	hwms     *hwmCheckpoint
	hwmEvery time.Duration

	// producers is given to every partition; nil: the default.
	producers *producers.Policy
	// keys is given to every partition (idempotency keys); nil: the default.
	keys *producers.KeyPolicy
	// lease is given to every partition (partition.leaseValid); set before
	// start, nil: always valid.
	lease func(time.Time) bool
	// now is the wall clock given to every partition (testfaults.go);
	// nil: time.Now.
	now func() time.Time
	// disk is given to every partition (partition.disk); set before
	// start, nil: no reserve.
	disk *storage.Guard
	// readBufs is given to every partition (partition.readBufs): the
	// buffers HTTP reads load stored batches into.
	readBufs readbuf.Pool
	// deletions deletes the logs of deleted replicas off mu (deletions.go).
	deletions *dirdelete.Queue

	mu sync.RWMutex
	// img is the newest image reconcile applied (guarded by mu): the
	// truth about the partitions placed here, made into a Partition on
	// first use (hosting.go).
	img *raftfsm.Image
	// topics is the topics with partitions made (guarded by mu).
	topics map[string]*hostedTopic
	// hostedCount is how many partitions img places here; -1: not
	// counted since img changed.
	hostedCount atomic.Int64
	closed      bool // guarded by mu
	// fsSync syncs the partitions' filesystem at Close (nil: it cannot).
	fsSync vfs.FSSync
	// applied is the index of the newest image reconcile applied (guarded
	// by mu): several goroutines reconcile (the metadata loop, the ISR
	// loop after its own change, a request that found a topic newer than
	// the hosted ones), and the one that takes mu last may hold the older
	// image.
	applied uint64
	// retry is the topics whose last reconcile failed (guarded by mu): the
	// next one looks at them again, whether they changed or not.
	retry map[string]bool

	// open is the hosted partitions whose log is open (lazylog.go,
	// openlogs.go); its lock is taken after a partition's lazyLog.mu.
	open openLogs
	// changed is the open logs changed since their last maintenance,
	// maintDue the others in order of their next due time, failed those
	// whose log failed, not recovered yet (maintenance.go, storage.go).
	changed, failed openLogs
	maintDue        dueQueue
	// isrAsk is the open logs whose ISR the next ISR round asks about
	// (new metadata, a follower outside the ISR at the mark, a change
	// not made yet), isrDue the led ones in order of when it must ask
	// next (isrchanges.go).
	isrAsk openLogs
	isrDue dueQueue
	// onMaintained and onISRAsked, set by a test, are called with each
	// log a maintenance round maintains and each partition an ISR round
	// asks.
	onMaintained, onISRAsked func(*Partition)
	// xattrs is where partition directories record their topic id
	// (logdir.go).
	xattrs xattrFS
	// sweepDir is the retention sweep's listing of the partitions
	// directory, nil between passes; the run goroutine's own.
	sweepDir *os.File

	cancel      context.CancelFunc
	done        chan struct{}
	isrDone     chan struct{}
	storageDone chan struct{}
	hwmDone     chan struct{}
}

// Metadata is what the broker needs of the metadata quorum (a
// *quorum.Node): all three are safe for concurrent use.
type Metadata interface {
	// Image is the newest applied image and a channel closed when a newer
	// one is published.
	Image() (*raftfsm.Image, <-chan struct{})
	// Apply proposes a command to the controller (ISR changes).
	Apply(ctx context.Context, cmd raftfsm.Command) (any, error)
	// CatchUp waits until this node applied what the active controller
	// had committed (catchUpOnMiss).
	CatchUp(ctx context.Context) error
}

// brokerConfig is what a broker is made from.
type Config struct {
	NodeID  int32
	DataDir string // the partitions live in <DataDir>/partitions
	Files   *segments.FileCache
	// Tails bounds the partitions' in-memory tails (nil: none kept).
	Tails  *segments.TailCache
	Logger *slog.Logger
	// ReplicaLagMax: a follower further behind leaves the ISR.
	ReplicaLagMax time.Duration
	// DialLeader connects to another broker's inter-broker Kafka port
	// (replication fetches).
	DialLeader func(context.Context, int32) (net.Conn, error)
	// StorageRetry is the storage loop's first retry interval (0: 1 s).
	StorageRetry time.Duration
	// Storage receives what the storage loop sees (nil: a new one).
	Storage *StorageHealth
	// MaxInflated and FramingOnly go to every log's segments.Config.
	MaxInflated int64
	FramingOnly bool
	// Lease reports whether this broker's lease was valid at a time
	// (nil: always); a leader whose lease lapsed stops acknowledging.
	Lease func(time.Time) bool
	// MinFreeDisk is the free space appends leave on the disk (0: none).
	MinFreeDisk int64
	// Producers and Keys bound the producer and idempotency-key tables
	// (nil: the defaults).
	Producers *producers.Policy
	Keys      *producers.KeyPolicy
	// Now is the node's wall clock for retention, segment.ms and record
	// timestamps (nil: time.Now); FS is the partitions' filesystem (nil:
	// the OS's). Both are the test-fault hooks (server/testfaults.go).
	Now func() time.Time
	FS  vfs.FS
	// LogIdleTimeout: each maintenance round closes the Files (when
	// given) no partition used for this long (0: never; lazylog.go).
	LogIdleTimeout time.Duration
	// HighWatermarkCheckpointInterval is how often the high watermarks
	// are checkpointed (0: DefaultHighWatermarkCheckpointInterval).
	HighWatermarkCheckpointInterval time.Duration
}

// newBroker prepares a broker following meta's images; start opens the
// partitions.
func New(cfg Config, meta Metadata) (*Broker, error) {
	dir := filepath.Join(cfg.DataDir, "partitions")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create partitions dir: %w", err)
	}
	// A dir made by an older version is 0755: the directory is runnel's
	// own, so tightening it keeps other users out of what is below.
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("partitions dir: %w", err)
	}
	b := &Broker{
		deletions: dirdelete.New(maxDeleteWorkers),
		id:        cfg.NodeID, dir: dir, meta: meta, logger: cfg.Logger,
		logOpts:       segments.Options{Files: cfg.Files, Tails: cfg.Tails, Logger: cfg.Logger, Now: cfg.Now, FS: cfg.FS},
		now:           cfg.Now,
		topics:        map[string]*hostedTopic{},
		changed:       openLogs{slot: func(p *Partition) *int32 { return &p.changedSlot }},
		maintDue:      dueQueue{dueHeap: dueHeap{idx: func(p *Partition) *int32 { return &p.maintIdx }}},
		isrAsk:        openLogs{slot: func(p *Partition) *int32 { return &p.isrAskSlot }},
		isrDue:        dueQueue{dueHeap: dueHeap{idx: func(p *Partition) *int32 { return &p.isrIdx }}},
		failed:        openLogs{slot: func(p *Partition) *int32 { return &p.failedSlot }},
		replicaLagMax: cfg.ReplicaLagMax,
		storageRetry:  cfg.StorageRetry, storage: cfg.Storage,
		maxInflated: cfg.MaxInflated, framingOnly: cfg.FramingOnly,
		lease: cfg.Lease, producers: cfg.Producers, keys: cfg.Keys,
		logIdleTimeout: cfg.LogIdleTimeout,
		xattrs:         osXattrs{},
		hwmEvery:       cmp.Or(cfg.HighWatermarkCheckpointInterval, DefaultHighWatermarkCheckpointInterval),
	}
	b.hwms = loadHWMCheckpoint(b.fs(), dir, cfg.Logger)
	b.hostedCount.Store(-1)
	if s, ok := vfs.AsFSSyncer(b.fs()); ok {
		// Opened before any log is written: its sync reports their
		// write errors (Close).
		var err error
		switch b.fsSync, err = s.OpenFSSync(dir); {
		case errors.Is(err, errors.ErrUnsupported):
			b.fsSync = nil // each log fsyncs its own files at Close
		case err != nil:
			return nil, fmt.Errorf("partitions dir: %w", err)
		}
	}
	b.disk = storage.NewGuard(dir, cfg.MinFreeDisk)
	b.fetches = newFetchManager(cfg.NodeID, cfg.DialLeader, b.disk, cfg.Logger.With("component", "replica-fetcher"))
	return b, nil
}

// Dir is the directory the partitions live in.
func (b *Broker) Dir() string { return b.dir }

// roleChanged starts or stops replication of p after its leader changed.
// Called with b.mu held; it does not block.
func (b *Broker) roleChanged(p *Partition) { b.fetches.follow(p) }

// Start reconciles with the current image (hosting its partitions; no log
// is opened: lazylog.go), then follows metadata changes and runs log
// maintenance until close.
func (b *Broker) Start(maintainEvery time.Duration) error {
	img, _ := b.meta.Image()
	if err := b.Reconcile(img); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.cancel, b.done = cancel, make(chan struct{})
	b.isrDone = make(chan struct{})
	b.storageDone = make(chan struct{})
	b.hwmDone = make(chan struct{})
	if b.storage == nil {
		b.storage = &StorageHealth{}
	}
	go b.run(ctx, maintainEvery, img)
	go b.isrLoop(ctx)
	go b.storageLoop(ctx, cmp.Or(b.storageRetry, time.Second))
	go b.hwmCheckpointLoop(ctx, b.hwmEvery)
	return nil
}

// isrLoop is run by each broker for the partitions it leads: it proposes
// ISR changes to the controller as followers fall behind or catch up.
func (b *Broker) isrLoop(ctx context.Context) {
	defer close(b.isrDone)
	tick := time.NewTicker(isrCheckInterval(b.replicaLagMax))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			b.isrRound(ctx, now)
		}
	}
}

func isrCheckInterval(lagMax time.Duration) time.Duration {
	return min(max(lagMax/4, 50*time.Millisecond), time.Second)
}

func (b *Broker) run(ctx context.Context, maintainEvery time.Duration, reconciled *raftfsm.Image) {
	defer close(b.done)
	b.retainHostedHWMs()
	if err := b.removeStrayDirs(ctx); err != nil {
		b.logger.Warn("remove partition directories not in the metadata", "err", err)
	}
	tick := time.NewTicker(maintainEvery)
	defer tick.Stop()
	// reconciled is the last image applied to the partitions (start
	// applied the first). Each round
	// compares the current image with it before waiting: an image
	// published while reconcile (or maintain) ran would otherwise be
	// missed, its change channel already closed before this loop asked
	// for the next one, and a new partition's follower would not be
	// created until some later metadata change (an acks=all write to it
	// then waited out its timeout).
	for {
		img, changed := b.meta.Image()
		if img != reconciled {
			if err := b.Reconcile(img); err != nil {
				b.logger.Error("apply metadata to partitions", "index", img.Index, "err", err)
			}
			reconciled = img
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-tick.C:
			b.maintain(ctx, b.wallNow()) // retention and segment.ms are wall-clock rules
		}
	}
}

func (b *Broker) wallNow() time.Time {
	if b.now == nil {
		return time.Now()
	}
	return b.now()
}

// Partition returns a partition this broker leads, first catching up with
// the image when the topic is newer than what this broker has applied.
func (b *Broker) Partition(topic string, idx int32) (*Partition, error) {
	p, err := b.replica(topic, idx)
	if err != nil {
		return nil, err
	}
	if leader := p.leader.Load(); leader != b.id {
		return nil, fmt.Errorf("%w: %s-%d is led by broker %d", ErrNotLeader, topic, idx, leader)
	}
	return p, nil
}

// replica returns a hosted partition replica, leader or follower.
func (b *Broker) replica(topic string, idx int32) (*Partition, error) {
	p, err := b.hostedReconciled(topic, idx)
	if err != nil {
		return nil, err
	}
	if err := p.ensureOpen(); err != nil {
		return nil, err
	}
	return p, nil
}

// hostedReconciled is replica without opening the log: a topic this broker
// has not applied yet (another may have applied it first) is caught up
// with and reconciled now.
func (b *Broker) hostedReconciled(topic string, idx int32) (*Partition, error) {
	if p, err := b.lookup(topic, idx); err == nil || !errors.Is(err, ErrUnknownTopic) {
		return p, err
	}
	img, _ := b.meta.Image()
	if _, ok := img.Topics.Lookup(topic); !ok {
		if !CatchUpOnMiss(context.Background(), b.meta) {
			return nil, fmt.Errorf("%w: %s", ErrUnknownTopic, topic)
		}
		if img, _ = b.meta.Image(); img.Topics.Get(topic) == nil {
			return nil, fmt.Errorf("%w: %s", ErrUnknownTopic, topic)
		}
	}
	if err := b.Reconcile(img); err != nil {
		return nil, err
	}
	return b.lookup(topic, idx)
}

// Lookup returns a hosted partition replica with its log open (opened now,
// outside b.mu, if this is its first use).
func (b *Broker) Lookup(topic string, idx int32) (*Partition, error) {
	p, err := b.lookup(topic, idx)
	if err != nil {
		return nil, err
	}
	if err := p.ensureOpen(); err != nil {
		return nil, err
	}
	return p, nil
}

// Close stops the follower and closes every log (flushing it and writing
// its recovery checkpoint).
func (b *Broker) Close() error {
	start := time.Now()
	if b.cancel != nil {
		b.cancel()
		<-b.done
		<-b.isrDone
		<-b.storageDone
		<-b.hwmDone
	}
	loopsStopped := time.Since(start)
	b.fetches.close()
	b.endSweep() // run has returned: the sweep is nobody's now
	b.mu.Lock()
	b.closed = true
	var parts []*Partition
	for _, ht := range b.topics {
		for _, p := range ht.parts {
			parts = append(parts, p)
		}
	}
	b.mu.Unlock()
	// Deletions first (b.closed: reconcile queues no more): a log being
	// deleted is not among those closed together below.
	b.waitDeletions()
	deletionsDone := time.Since(start)
	// The open logs close together (segments.CloseAll): with a sync of the
	// filesystem in place of each log's dozen fsyncs, or 16 at a time
	// where the filesystem has none. 20,000 written logs closed one after
	// another took minutes after SIGTERM.
	gatherStart := time.Now()
	var closing []segments.Closing
	for _, p := range parts {
		if c, ok := p.closing(); ok {
			closing = append(closing, c)
		}
	}
	gathered := time.Since(gatherStart)
	times, err := segments.CloseAllTimed(b.fsSync, closing, closeParallelism)
	wakeStart := time.Now()
	for _, p := range parts {
		p.wake()
	}
	woken := time.Since(wakeStart)
	// The logs' marks in one write, as they closed.
	checkpointStart := time.Now()
	err = errors.Join(err, b.checkpointHWMs())
	checkpoint := time.Since(checkpointStart)
	if b.fsSync != nil {
		err = errors.Join(err, b.fsSync.Close())
		b.fsSync = nil
	}
	// Where an exit's time went (a SIGTERM's exit once took 32.7 s at
	// 300,000 logs with nothing to say which part): the loops' last
	// rounds, the fetchers and deletions, the partitions' last state
	// (gathering: each one's lock, refusing new work), then the logs' own
	// close and the waking of whatever waited on a partition (waking).
	// 300,000 partitions' closes left 1.4-3.2 s of "took" unnamed (issue 19).
	b.logger.Info("partition logs closed", "took", time.Since(start).Round(time.Millisecond),
		"loops_stopped", loopsStopped.Round(time.Millisecond),
		"fetchers_and_deletions", (deletionsDone - loopsStopped).Round(time.Millisecond),
		"gathering", gathered.Round(time.Millisecond), "waking", woken.Round(time.Millisecond),
		"logs", len(closing), "closing_logs", times.Logs.Round(time.Millisecond),
		"fs_syncs", times.SyncCount, "syncing", times.Syncs.Round(time.Millisecond),
		"renaming", times.Renames.Round(time.Millisecond), "checkpoint", checkpoint.Round(time.Millisecond))
	return err
}

// closeParallelism is how many logs Close works on at once. Concurrent
// fsyncs share the filesystem journal's commits.
const closeParallelism = 16
