package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/runnel/runnel/kafkaproto"
	"github.com/runnel/runnel/recordbatch"
	"github.com/runnel/runnel/segments"
	"github.com/runnel/runnel/server/broker/producerlog"
	"github.com/runnel/runnel/server/broker/producers"
	"github.com/runnel/runnel/server/broker/readbuf"
	"github.com/runnel/runnel/server/broker/storage"
	"github.com/runnel/runnel/server/broker/topicconfig"
)

var (
	ErrUnknownTopic         = errors.New("unknown topic")
	ErrUnknownPartition     = errors.New("unknown partition")
	ErrNotLeader            = errors.New("not the leader of this partition")
	ErrOffsetOutOfRange     = errors.New("offset out of range")
	ErrTooLarge             = errors.New("record batch larger than max.message.bytes")
	ErrOutOfOrderSequence   = producers.ErrOutOfOrderSequence
	ErrInvalidProducerEpoch = producers.ErrInvalidProducerEpoch
	ErrIdempotencyKeyReused = producers.ErrIdempotencyKeyReused
	ErrUnknownProducerID    = errors.New("unknown producer id")
	ErrNotReady             = errors.New("node not ready")
	ErrShuttingDown         = errors.New("node shutting down")
)

// Partition is one partition replica hosted by this broker.
//
// Lock order: Broker.mu, then lazy.mu, then appendMu, then repl.mu, then
// notifyMu; then watchers' lock, then a fetch session's (which its watch
// takes to queue the partition), or its follower's set (touch).
type Partition struct {
	topic   string
	index   int32
	topicID [16]byte
	// lazy holds the log, opened on first use (lazylog.go): read it with
	// p.log(), which is nil until then.
	lazy lazyLog
	// openSlot, changedSlot and failedSlot are the partition's slots in
	// Broker.open, changed and failed (-1: not in it), each guarded by its
	// set's lock (openlogs.go); maintIdx is its place in Broker.maintDue
	// (guarded by the queue's lock, duequeue.go).
	openSlot, changedSlot, failedSlot int32
	maintIdx                          int32
	// maintChanged is set while it is in Broker.changed (maintenance.go).
	maintChanged atomic.Bool
	// isrAskSlot is its slot in Broker.isrAsk, where isrAsked says it is
	// (guarded by the set's lock; the flag read without it), and isrIdx
	// its place in Broker.isrDue (isrchanges.go).
	isrAskSlot, isrIdx int32
	isrAsked           atomic.Bool

	leaderEpoch atomic.Int32
	leader      atomic.Int32 // the partition's leader per the metadata image
	// term is leader and leaderEpoch of the same image in one word
	// (leader<<32 | epoch), for appends as the leader: read one after the
	// other, a leader that lost the partition could stamp its last append
	// with the next leader's epoch (see leadership).
	term atomic.Uint64
	hwm  atomic.Int64 // high watermark: the log end of the slowest in-sync replica
	// hwmDirty says the mark moved since the high-watermark checkpoint
	// last read it (hwmMoved); hwmLowered says it went down since
	// (syncLoweredHWM writes it); hwmLegacy says the previous release's
	// file of it is still in its directory (hwmcheckpoint.go).
	hwmDirty   atomic.Bool
	hwmLowered atomic.Bool
	hwmLegacy  atomic.Bool
	minISR     atomic.Int32 // min.insync.replicas
	repl       replicaSet
	// isrDue is when the ISR loop next needs to ask whether the ISR
	// should change, in Unix nanoseconds (0: at its next round), written
	// under repl.mu (isrChangeWanted, markISRCheckLocked), which queue the
	// partition for the round then (Broker.isrAsk, isrDue).
	isrDue atomic.Int64

	appendMu sync.Mutex // serializes appends and guards producers and keys
	// producers and keys are kept by appends, a leader's and a
	// follower's (followProducersLocked); nil / not loaded: rebuilt from
	// the log when an idempotent or keyed write needs them.
	producers producerlog.Table
	keys      producerlog.Keys // idempotency keys
	// keyPolicyCfg bounds the key index; set by the broker before the
	// partition serves, nil: the default.
	keyPolicyCfg *producers.KeyPolicy
	// producerPolicy bounds the producer table and checks producer ids;
	// set by the broker before the partition serves, nil: the default.
	producerPolicy *producers.Policy
	maxMessage     atomic.Int32 // max.message.bytes
	tsAppend       atomic.Bool  // message.timestamp.type=LogAppendTime

	maxRecordBytes int64 // bound on one record decoded for HTTP; set at creation
	// disk refuses appends while the partitions' filesystem is below
	// --min-free-disk; set at creation, nil: no reserve.
	disk *storage.Guard
	// applying is set while a fetched answer is applied to this follower,
	// or its log opened, on the fetch pool (fetchapply.go): the fetcher
	// leaves it alone until then.
	applying atomic.Bool
	// readBufs recycles HTTP reads' buffers; set at creation, nil: each
	// read allocates its own.
	readBufs *readbuf.Pool
	// leaseValid reports whether this broker may lead at a time (its
	// heartbeats answered: quorum.Node.BrokerLeaseValid); set at creation,
	// nil: always.
	leaseValid func(time.Time) bool
	// now is the wall clock (record timestamps, producer-state expiry,
	// when a follower fetched or caught up);
	// nil: time.Now.
	now func() time.Time

	notifyMu sync.Mutex
	// notify is closed when hwm advances or the partition goes away; nil
	// while nobody waits (a million idle partitions hold no channel).
	notify chan struct{}
	// watchers are the fetch sessions holding the partition, told of the
	// same changes (Watch); empty while none does.
	watchers kafkaproto.Watchers
	// follower is the fetcher replicating this partition from its leader,
	// told of the same changes so that its next request looks at this
	// partition again (leaderFetcher.touch); nil while none does.
	follower atomic.Pointer[leaderFetcher]
}

// newPartition makes a partition replica whose log is open already (log
// not nil) or is opened on first use by the broker (lazylog.go).
func newPartition(topic string, index int32, id [16]byte, log *segments.Log, cfgs map[string]string) *Partition {
	return newPartitionWith(topic, index, id, log, partitionConfigOf(cfgs))
}

// newPartitionWith is newPartition with the topic's configs read already
// (once per topic, not per partition: a restart hosts a million).
func newPartitionWith(topic string, index int32, id [16]byte, log *segments.Log, pc partitionConfig) *Partition {
	p := &Partition{topic: topic, index: index, topicID: id,
		maxRecordBytes: consumeMaxRecordBytes, openSlot: -1, changedSlot: -1, failedSlot: -1, maintIdx: evicted,
		isrAskSlot: -1, isrIdx: evicted}
	p.leader.Store(-1)
	p.leaderEpoch.Store(-1)
	p.term.Store(packTerm(-1, -1))
	if log != nil {
		p.loadHWM(log)
		p.lazy.log.Store(log)
	}
	p.setConfig(pc)
	return p
}

// partitionConfig is the topic configs a partition reads on its hot paths.
type partitionConfig struct {
	maxMessage int32 // max.message.bytes
	tsAppend   bool  // message.timestamp.type=LogAppendTime
	minISR     int32 // min.insync.replicas
}

func partitionConfigOf(cfgs map[string]string) partitionConfig {
	return partitionConfig{
		maxMessage: int32(topicconfig.Int(cfgs, "max.message.bytes")),
		tsAppend:   topicconfig.Effective(cfgs, "message.timestamp.type") == "LogAppendTime",
		minISR:     int32(topicconfig.Int(cfgs, "min.insync.replicas")),
	}
}

func (p *Partition) applyConfig(cfgs map[string]string) { p.setConfig(partitionConfigOf(cfgs)) }

func (p *Partition) setConfig(pc partitionConfig) {
	p.maxMessage.Store(pc.maxMessage)
	p.tsAppend.Store(pc.tsAppend)
	p.minISR.Store(pc.minISR)
}

// Changed returns a channel closed at the next high watermark advance.
func (p *Partition) Changed() <-chan struct{} {
	p.notifyMu.Lock()
	defer p.notifyMu.Unlock()
	if p.notify == nil {
		p.notify = make(chan struct{})
	}
	return p.notify
}

func (p *Partition) wake() {
	p.notifyMu.Lock()
	if p.notify != nil {
		close(p.notify)
		p.notify = nil // the next Changed makes a new one
	}
	p.notifyMu.Unlock()
	p.watchers.Notify()
	if f := p.follower.Load(); f != nil {
		f.touch(p)
	}
}

// Watch attaches a fetch session's watch (kafkaproto.PartitionWatcher):
// every wake calls it, and on a leader the ISR check counts the follower
// session's fetches as fetches of this partition at the session's
// position (wantedISR).
func (p *Partition) Watch(w *kafkaproto.Watch) { p.watchers.Attach(w) }

// AppendResult is what append stored, or the original offsets of a duplicate.
type AppendResult struct {
	BaseOffset    int64
	LastOffset    int64
	LogAppendTime int64 // -1 unless LogAppendTime
	LogStart      int64
	Duplicate     bool
}

// append validates batches and appends them atomically. Idempotent batches
// are checked against the producer table: a duplicate of a stored batch
// returns its original offsets and writes nothing.
func (p *Partition) append(batches []byte) (AppendResult, error) { return p.appendKeyed(batches, nil) }

// appendKeyed is append; with k (one batch stamped by stampKey) the batch is
// checked against the key index instead (idemkeys.go, producers.KeyIndex). Without k, batches
// under ids of the key range are refused.
func (p *Partition) appendKeyed(batches []byte, k *producers.Key) (AppendResult, error) {
	var one [1]batchView // a producer's append is one batch: no allocation for it
	views := one[:0]
	size := 0
	// Header, CRC and framing only: the log validates every record.
	err := splitBatches(batches, func(b batchView) error {
		size += len(b.Raw)
		views = append(views, b)
		return nil
	})
	if err != nil {
		return AppendResult{}, err
	}
	if size != len(batches) || len(views) == 0 {
		return AppendResult{}, fmt.Errorf("%w: %d trailing bytes", recordbatch.ErrCorruptBatch, len(batches)-size)
	}
	for _, b := range views {
		if b.IsControl() {
			return AppendResult{}, errControlFromClient
		}
		if len(b.Raw) > int(p.maxMessage.Load()) {
			return AppendResult{}, fmt.Errorf("%w: batch of %d bytes, max.message.bytes is %d", ErrTooLarge, len(b.Raw), p.maxMessage.Load())
		}
	}

	if k == nil {
		if err := refuseKeyProducerIDs(views); err != nil {
			return AppendResult{}, err
		}
	}
	if err := p.checkProducerIDs(views); err != nil {
		return AppendResult{}, err
	}
	if err := p.mayWrite(len(batches)); err != nil {
		return AppendResult{}, err
	}
	if err := p.loadProducers(views, p.wallNow()); err != nil {
		return AppendResult{}, err
	}
	if k != nil {
		if err := p.loadKeys(p.wallNow()); err != nil {
			return AppendResult{}, err
		}
	}

	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	now := p.wallNow()
	if dup, ok, err := p.checkProducersLocked(views, now); err != nil || ok {
		return dup, err
	}
	if dup, ok, err := p.checkKeyLocked(k, views, now); err != nil || ok {
		return dup, err
	}
	epoch, err := p.leaderTermLocked()
	if err != nil {
		return AppendResult{}, err
	}
	appendTime := int64(-1)
	if p.tsAppend.Load() {
		appendTime = now.UnixMilli()
		setLogAppendTime(views, appendTime)
	}
	info, err := p.log().Append(batches, epoch)
	p.touchLog()
	if errors.Is(err, segments.ErrStorage) {
		return AppendResult{}, storageErr(p.topic, p.index, err)
	}
	if err != nil {
		return AppendResult{}, fmt.Errorf("append to %s-%d: %w", p.topic, p.index, err)
	}
	p.recordProducersLocked(views, info.BaseOffset, now)
	p.recordKeyLocked(k, views, info.BaseOffset, now)
	p.leaderAppended()
	return AppendResult{BaseOffset: info.BaseOffset, LastOffset: info.LastOffset,
		LogAppendTime: appendTime, LogStart: info.LogStartOffset}, nil
}

// wallNow is the node's wall clock (testfaults.go).
func (p *Partition) wallNow() time.Time {
	if p.now == nil {
		return time.Now()
	}
	return p.now()
}

// mayWrite is what a leader checks before appending n bytes. A broker the
// controllers have not heard from for a session timeout is about to be
// fenced and replaced as leader (or already is, in metadata it has not
// seen): what it appended now would be lost. Below --min-free-disk the
// disk is kept for the metadata.
func (p *Partition) mayWrite(n int) error {
	if p.leaseValid != nil && !p.leaseValid(time.Now()) {
		return fmt.Errorf("%w: %s-%d: this broker's heartbeats went unanswered for a session timeout", ErrNotLeader, p.topic, p.index)
	}
	return p.disk.Admit(n)
}

// packTerm packs a leader and its epoch into one word (Partition.term).
func packTerm(leader, epoch int32) uint64 { return uint64(uint32(leader))<<32 | uint64(uint32(epoch)) }

// leadership is the partition's leader and leader epoch as one image set
// them.
func (p *Partition) leadership() (leader, epoch int32) {
	t := p.term.Load()
	return int32(uint32(t >> 32)), int32(uint32(t))
}

// leaderTermLocked is the epoch a leader append is stamped with, read with
// the leader at one instant and checked there: a request that found this
// broker leader may reach its append after an image moved the partition
// to another broker at the next epoch (a controlled shutdown moves it with
// requests in flight). Stamped with that epoch, its batch would sit in
// this log as if the new leader had written it, where no epoch comparison
// finds it: this replica then kept records the new leader never had, or,
// following it, fetched a batch starting below its log end forever.
// Refused, the producer retries on the new leader; stamped with the old
// epoch, a late append is cut when this replica truncates to the new
// leader's history (appendMu orders the two). Called with appendMu held.
func (p *Partition) leaderTermLocked() (int32, error) {
	leader, epoch := p.leadership()
	if self := p.selfID(); leader != self {
		return 0, fmt.Errorf("%w: %s-%d is led by broker %d", ErrNotLeader, p.topic, p.index, leader)
	}
	return epoch, p.epochCheckLocked(epoch)
}

// selfID is this broker's id as the partition's replica set knows it.
func (p *Partition) selfID() int32 {
	p.repl.mu.Lock()
	defer p.repl.mu.Unlock()
	return p.repl.self
}

// epochCheckLocked refuses a leader append at epoch when the log already
// holds a later epoch. Leader epochs in a log never go backwards: they
// decide where a returning replica truncates. A leader whose epoch is
// below the last one in its log is stale (its metadata went back, or
// another leader wrote since): it is no leader for this write. Called with
// appendMu held.
func (p *Partition) epochCheckLocked(epoch int32) error {
	if last := p.log().LeaderEpoch(); epoch < last {
		return fmt.Errorf("%w: %s-%d leader epoch %d is below the log's %d", ErrNotLeader, p.topic, p.index, epoch, last)
	}
	return nil
}

// Read returns whole batches from offset up to the high watermark. Like
// Kafka's, an offset between the high watermark and the log end is no
// error, only nothing to read yet: a leader just elected learns the high
// watermark its predecessor had advanced to one fetch later, and a
// consumer already there used to get OFFSET_OUT_OF_RANGE and start over
// at the log start (issue 20, item 2).
func (p *Partition) Read(offset int64, maxBytes int) (segments.Chunk, error) {
	return unpinSmall(p.readUpTo(offset, maxBytes, p.hwm.Load()))
}

// readUpTo returns whole batches from offset, none at or past limit (at
// most the high watermark: the last stable offset for read_committed).
func (p *Partition) readUpTo(offset int64, maxBytes int, limit int64) (segments.Chunk, error) {
	hwm := p.hwm.Load()
	if end := p.log().EndOffset(); offset > max(hwm, end) || offset < p.log().StartOffset() {
		return nil, fmt.Errorf("%w: %d not in [%d, %d]", ErrOffsetOutOfRange, offset, p.log().StartOffset(), max(hwm, end))
	}
	c, err := p.log().Read(offset, maxBytes, min(limit, hwm))
	if errors.Is(err, segments.ErrOffsetOutOfRange) {
		return nil, fmt.Errorf("%w: %v", ErrOffsetOutOfRange, err)
	}
	return c, err
}

// ReadReplica serves a follower: whole batches up to the log end.
func (p *Partition) ReadReplica(offset int64, maxBytes int) (segments.Chunk, error) {
	c, err := p.log().Read(offset, maxBytes, p.log().EndOffset())
	if errors.Is(err, segments.ErrOffsetOutOfRange) {
		return nil, fmt.Errorf("%w: %v", ErrOffsetOutOfRange, err)
	}
	return unpinSmall(c, err)
}

// close closes the log (if it was ever opened) and wakes waiters so they
// notice. It never opens again. Broker.Close
// closes all its partitions together instead (closing).
func (p *Partition) close() error {
	defer p.wake()
	if c, ok := p.closing(); ok {
		return segments.CloseAll(nil, []segments.Closing{c}, 1)
	}
	return nil
}

// closing is close for segments.CloseAll: the log, if it was ever opened.
// The caller wakes the waiters once it closed.
func (p *Partition) closing() (segments.Closing, bool) {
	p.lazy.mu.Lock()
	defer p.lazy.mu.Unlock()
	p.lazy.gone = ErrShuttingDown
	log := p.log()
	if log == nil {
		return segments.Closing{}, false
	}
	return segments.Closing{Log: log}, true // its mark: Broker.Close's checkpoint
}

// Produce appends as the leader and, for acks=all, waits until the in-sync
// replicas hold the records. With fewer in-sync replicas than
// min.insync.replicas an acks=all write is refused before it is appended.
func (p *Partition) Produce(ctx context.Context, batches []byte, acks int) (AppendResult, error) {
	return p.ProduceKeyed(ctx, batches, acks, nil)
}

// ProduceKeyed is produce with an idempotency key (appendKeyed).
func (p *Partition) ProduceKeyed(ctx context.Context, batches []byte, acks int, k *producers.Key) (AppendResult, error) {
	if acks != -1 {
		return p.appendKeyed(batches, k)
	}
	res, wait, err := p.AppendForAcks(batches, k)
	if err != nil {
		return res, err
	}
	return res, wait.Wait(ctx)
}

// AppendForAcks is an acks=all produce up to the wait: it refuses the write
// when the ISR is below min.insync.replicas, appends, and returns the wait
// for the in-sync replicas.
func (p *Partition) AppendForAcks(batches []byte, k *producers.Key) (AppendResult, ReplicaWait, error) {
	epoch := p.leaderEpoch.Load()
	if n, min := p.isrSize(), int(p.minISR.Load()); n < min {
		return AppendResult{}, ReplicaWait{}, fmt.Errorf("%w: %s-%d has %d in-sync replicas, min.insync.replicas is %d", ErrNotEnoughReplicas, p.topic, p.index, n, min)
	}
	res, err := p.appendKeyed(batches, k)
	if err != nil {
		return res, ReplicaWait{}, err
	}
	return res, ReplicaWait{p: p, Offset: res.LastOffset, Epoch: epoch}, nil
}

// ReplicaWait is what an acks=all append waits for: its partition's
// in-sync replicas to hold Offset, appended at leader epoch Epoch
// (WaitReplicated). A value, not a closure: a produce request holds one
// for each of its partitions (issue 19).
type ReplicaWait struct {
	p      *Partition
	Offset int64
	Epoch  int32
}

// Wait blocks until the in-sync replicas hold the append, or ctx ends.
func (w ReplicaWait) Wait(ctx context.Context) error {
	return w.p.WaitReplicated(ctx, w.Offset, w.Epoch)
}

func (p *Partition) CheckLeaderEpoch(current int32) error {
	if current < 0 {
		return nil
	}
	switch mine := p.leaderEpoch.Load(); {
	case current < mine:
		return fmt.Errorf("%w: client epoch %d, leader epoch %d", kafkaproto.ErrFencedLeaderEpoch, current, mine)
	case current > mine:
		return fmt.Errorf("%w: client epoch %d, leader epoch %d", kafkaproto.ErrUnknownLeaderEpoch, current, mine)
	}
	return nil
}

// MaxTimestamp answers ListOffsets -3 below the high watermark.
func (p *Partition) MaxTimestamp() (int64, int64, error) {
	off, ts, ok, err := p.log().MaxTimestamp()
	if err != nil || !ok || off >= p.hwm.Load() {
		return -1, -1, err
	}
	return off, ts, nil
}

// openLog is the partition's log, opened now if it was not: a partition
// returned by Broker.Partition or Lookup has it open; one from PartitionsOf
// may not (SizeBytes and Offsets read those without opening an empty log).
// nil when opening fails.
func (p *Partition) openLog() *segments.Log {
	if p.ensureOpen() != nil {
		return nil
	}
	return p.log()
}

// LogStart is the first offset the log holds and LogEnd the offset after
// its last record (safe for concurrent use). The partition must be one
// Broker.Partition or Lookup returned, its log open.
func (p *Partition) LogStart() int64 { return p.openLog().StartOffset() }
func (p *Partition) LogEnd() int64   { return p.openLog().EndOffset() }

// OffsetForTimestamp is the first offset whose record has a timestamp at or
// after ts, with that timestamp (segments.Log.OffsetForTimestamp; ok
// false: none). Its log must be open, as for LogStart.
func (p *Partition) OffsetForTimestamp(ts int64) (offset, timestamp int64, ok bool, err error) {
	return p.openLog().OffsetForTimestamp(ts)
}

// DeleteRecordsBefore moves the log start up to offset (Kafka's
// DeleteRecords; the caller bounds offset by the high watermark) and
// returns the new log start. Its log must be open, as for LogStart.
func (p *Partition) DeleteRecordsBefore(offset int64) (int64, error) {
	log := p.openLog()
	before := log.StartOffset()
	defer p.touchLog()
	if err := log.DeleteRecordsBefore(offset); err != nil {
		return -1, err
	}
	if log.StartOffset() != before {
		p.wake() // fetch sessions tell their followers and consumers
	}
	return log.StartOffset(), nil
}

// HighWatermark is the offset below which records are replicated as
// acks=all requires (and readable).
func (p *Partition) HighWatermark() int64 { return p.hwm.Load() }

// LeaderEpoch is the leader epoch this replica last applied.
func (p *Partition) LeaderEpoch() int32 { return p.leaderEpoch.Load() }

// Topic is the name of the topic this replica belongs to; fixed at creation.
func (p *Partition) Topic() string { return p.topic }

// Index is the partition's number in its topic; fixed at creation.
func (p *Partition) Index() int32 { return p.index }
