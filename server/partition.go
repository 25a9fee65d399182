package server

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/runnel/runnel/segments"
)

var (
	errUnknownTopic         = errors.New("unknown topic")
	errUnknownPartition     = errors.New("unknown partition")
	errNotLeader            = errors.New("not the leader of this partition")
	errOffsetOutOfRange     = errors.New("offset out of range")
	errTooLarge             = errors.New("record batch larger than max.message.bytes")
	errOutOfOrderSequence   = errors.New("out of order sequence number")
	errInvalidProducerEpoch = errors.New("invalid producer epoch")
	errNotReady             = errors.New("node not ready")
	errShuttingDown         = errors.New("node shutting down")
)

// partition is one partition replica hosted by this broker.
//
// Lock order: broker.mu, then partition.appendMu, then partition.notifyMu.
type partition struct {
	topic   string
	index   int32
	topicID [16]byte
	log     *segments.Log

	leaderEpoch atomic.Int32
	leader      atomic.Int32 // the partition's leader per the metadata image
	hwm         atomic.Int64 // high watermark: with one replica, the log end

	appendMu   sync.Mutex     // serializes appends and guards producers
	producers  *producerTable // nil until the first idempotent batch
	maxMessage atomic.Int32   // max.message.bytes
	tsAppend   atomic.Bool    // message.timestamp.type=LogAppendTime

	notifyMu sync.Mutex
	notify   chan struct{} // closed when hwm advances or the partition goes away
}

func newPartition(topic string, index int32, id [16]byte, log *segments.Log, cfgs map[string]string) *partition {
	p := &partition{topic: topic, index: index, topicID: id, log: log, notify: make(chan struct{})}
	p.leader.Store(-1)
	p.hwm.Store(log.EndOffset())
	p.applyConfig(cfgs)
	return p
}

// setLeader records the leader and epoch the metadata gives, waking waiters
// when leadership moved so long polls notice.
func (p *partition) setLeader(leader, epoch int32) {
	old := p.leader.Swap(leader)
	p.leaderEpoch.Store(epoch)
	if old != leader {
		p.wake()
	}
}

func (p *partition) applyConfig(cfgs map[string]string) {
	p.maxMessage.Store(int32(configInt(cfgs, "max.message.bytes")))
	p.tsAppend.Store(effectiveConfig(cfgs, "message.timestamp.type") == "LogAppendTime")
}

// changed returns a channel closed at the next high watermark advance.
func (p *partition) changed() <-chan struct{} {
	p.notifyMu.Lock()
	defer p.notifyMu.Unlock()
	return p.notify
}

func (p *partition) wake() {
	p.notifyMu.Lock()
	close(p.notify)
	p.notify = make(chan struct{})
	p.notifyMu.Unlock()
}

// appendResult is what append stored, or the original offsets of a duplicate.
type appendResult struct {
	baseOffset    int64
	lastOffset    int64
	logAppendTime int64 // -1 unless LogAppendTime
	logStart      int64
	duplicate     bool
}

// append validates batches and appends them atomically. Idempotent batches
// are checked against the producer table: a duplicate of a stored batch
// returns its original offsets and writes nothing.
func (p *partition) append(batches []byte) (appendResult, error) {
	var views []batchView
	size := 0
	err := splitBatches(batches, func(b batchView) error {
		size += len(b.raw)
		views = append(views, b)
		return checkRecords(b)
	})
	if err != nil {
		return appendResult{}, err
	}
	if size != len(batches) || len(views) == 0 {
		return appendResult{}, fmt.Errorf("%w: %d trailing bytes", errCorruptBatch, len(batches)-size)
	}
	for _, b := range views {
		if len(b.raw) > int(p.maxMessage.Load()) {
			return appendResult{}, fmt.Errorf("%w: batch of %d bytes, max.message.bytes is %d", errTooLarge, len(b.raw), p.maxMessage.Load())
		}
	}

	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	if dup, ok, err := p.checkProducersLocked(views); err != nil || ok {
		return dup, err
	}
	appendTime := int64(-1)
	if p.tsAppend.Load() {
		appendTime = time.Now().UnixMilli()
		setLogAppendTime(views, appendTime)
	}
	info, err := p.log.Append(batches, p.leaderEpoch.Load())
	if err != nil {
		return appendResult{}, fmt.Errorf("append to %s-%d: %w", p.topic, p.index, err)
	}
	p.recordProducersLocked(views, info.BaseOffset)
	p.hwm.Store(info.LastOffset + 1)
	p.wake()
	return appendResult{baseOffset: info.BaseOffset, lastOffset: info.LastOffset,
		logAppendTime: appendTime, logStart: info.LogStartOffset}, nil
}

// read returns whole batches from offset up to the high watermark.
func (p *partition) read(offset int64, maxBytes int) (segments.Chunk, error) {
	hwm := p.hwm.Load()
	if offset > hwm || offset < p.log.StartOffset() {
		return nil, fmt.Errorf("%w: %d not in [%d, %d]", errOffsetOutOfRange, offset, p.log.StartOffset(), hwm)
	}
	c, err := p.log.Read(offset, maxBytes, hwm)
	if errors.Is(err, segments.ErrOffsetOutOfRange) {
		return nil, fmt.Errorf("%w: %v", errOffsetOutOfRange, err)
	}
	return c, err
}

// close closes the log and wakes waiters so they notice.
func (p *partition) close() error {
	err := p.log.Close()
	p.wake()
	return err
}
