package broker

import (
	"context"
	"errors"
	"fmt"

	"github.com/runnel/runnel/segments"
	"github.com/runnel/runnel/server/broker/producers"

	"github.com/runnel/runnel/recordbatch"
)

// Transaction markers, the log side of Kafka's transactions: a transaction
// coordinator ends a producer's transaction in each partition it touched by
// writing a commit or abort marker (a control batch, recordbatch.Marker) with
// WriteTxnMarker on the partition's leader, directly when it is this
// broker, or through WriteTxnMarkers (Kafka API 27) on the leader's
// inter-broker port otherwise. Clients cannot write control batches
// (Produce answers INVALID_RECORD) and the client port refuses
// WriteTxnMarkers.

var (
	ErrCoordinatorFenced = producers.ErrCoordinatorFenced
	errControlFromClient = fmt.Errorf("%w: clients may not write control batches (transaction markers)", recordbatch.ErrInvalidRecord)
)

// WriteTxnMarker writes the marker m (commit or abort of producer
// m.ProducerID at m.ProducerEpoch, from a coordinator at
// m.CoordinatorEpoch) to topic-partition, which this broker must lead, and
// returns once the in-sync replicas hold it (acks=all; ctx bounds the
// wait). It returns the marker's offset. Errors: errNotLeader,
// errUnknownTopic / errUnknownPartition, errNotEnoughReplicas (ISR below
// min.insync.replicas: nothing written), errInvalidProducerEpoch (the
// partition has seen a newer epoch of the producer), errCoordinatorFenced
// (it has seen a marker from a newer coordinator epoch), a storage error.
// A marker for a producer with no open transaction in the partition is
// written anyway (Kafka does; a retried marker after a coordinator
// failover is harmless). Safe for concurrent use.
func (b *Broker) WriteTxnMarker(ctx context.Context, topic string, partition int32, m recordbatch.Marker) (int64, error) {
	p, err := b.Partition(topic, partition)
	if err != nil {
		return -1, err
	}
	res, wait, err := p.appendMarker(m)
	if err != nil {
		return -1, err
	}
	return res.BaseOffset, wait(ctx)
}

// appendMarker is WriteTxnMarker on the partition up to the wait.
func (p *Partition) appendMarker(m recordbatch.Marker) (AppendResult, func(context.Context) error, error) {
	if m.Type != recordbatch.ControlAbort && m.Type != recordbatch.ControlCommit {
		return AppendResult{}, nil, fmt.Errorf("%w: marker type %d", recordbatch.ErrInvalidRecord, m.Type)
	}
	if n, min := p.isrSize(), int(p.minISR.Load()); n < min {
		return AppendResult{}, nil, fmt.Errorf("%w: %s-%d has %d in-sync replicas, min.insync.replicas is %d", ErrNotEnoughReplicas, p.topic, p.index, n, min)
	}
	if err := p.producersErr(p.producers.Load(&p.appendMu, p.log(), p.policy(), p.wallNow())); err != nil {
		return AppendResult{}, nil, err
	}
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	now := p.wallNow()
	if err := p.loadProducersLocked(now); err != nil {
		return AppendResult{}, nil, err
	}
	if err := p.producers.Get().CheckMarker(m, now); err != nil {
		return AppendResult{}, nil, err
	}
	batch := recordbatch.BuildControl(m, now.UnixMilli())
	if err := p.mayWrite(len(batch)); err != nil {
		return AppendResult{}, nil, err
	}
	epoch, err := p.leaderTermLocked()
	if err != nil {
		return AppendResult{}, nil, err
	}
	info, err := p.log().Append(batch, epoch)
	p.touchLog()
	if errors.Is(err, segments.ErrStorage) {
		return AppendResult{}, nil, storageErr(p.topic, p.index, err)
	}
	if err != nil {
		return AppendResult{}, nil, fmt.Errorf("write marker to %s-%d: %w", p.topic, p.index, err)
	}
	p.producers.Get().Marker(m, now.UnixMilli(), now)
	p.leaderAppended()
	res := AppendResult{BaseOffset: info.BaseOffset, LastOffset: info.LastOffset, LogAppendTime: -1, LogStart: info.LogStartOffset}
	return res, func(ctx context.Context) error { return p.WaitReplicated(ctx, res.LastOffset, epoch) }, nil
}
