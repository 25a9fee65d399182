package kapi

import (
	"context"
	"time"
)

// The optional data-path parts of a Broker, each found by the listener with
// a type assertion on its Broker.

// QuotaEnforcer is optionally implemented by a Broker that enforces client
// quotas. ChargeQuota is told, after each request from a client
// connection, who sent it and what it cost (the produce request's bytes,
// the fetch response's bytes, the time spent serving it) and returns how
// long the client is throttled (0: not). Safe for concurrent use; called
// on every request, so it must be cheap when there are no quotas.
type QuotaEnforcer interface {
	ChargeQuota(principal, clientID string, produceBytes, fetchBytes int, elapsed time.Duration) time.Duration
}

// ReplicatedProducer is optionally implemented by a Broker that can split an
// acks=all produce in two: AppendForAcks does what Produce does up to the
// wait (validation, min.insync.replicas, append) and returns the wait, which
// blocks until the in-sync replicas hold the records or ctx ends. Safe for
// concurrent use.
type ReplicatedProducer interface {
	AppendForAcks(ctx context.Context, topic string, partition int32, batches []byte) (ProduceResult, AckWait, error)
}

// AckWait is an acks=all write's wait for its in-sync replicas: Wait
// blocks until On's replicas hold Offset (the write's last offset,
// appended at leader epoch Epoch) or ctx ends. A value rather than a
// closure: a produce request of 100,000 partitions holds one for each,
// and a closure each (two, with the door's error mapping) were 2 of a
// produce's ~12 allocations per partition (issue 19). An On that is a
// pointer, or a struct of one pointer, is stored in the interface
// without an allocation. The zero value waits for nothing.
type AckWait struct {
	On     ReplicaWaiter
	Offset int64
	Epoch  int32
}

// Wait blocks until the in-sync replicas hold the write or ctx ends.
func (w AckWait) Wait(ctx context.Context) error {
	if w.On == nil {
		return nil
	}
	return w.On.WaitReplicated(ctx, w.Offset, w.Epoch)
}

// ReplicaWaiter is a partition's side of an AckWait: WaitReplicated
// blocks until its in-sync replicas hold offset, appended at leader epoch
// epoch, or ctx ends (what the two numbers mean is the waiter's).
type ReplicaWaiter interface {
	WaitReplicated(ctx context.Context, offset int64, epoch int32) error
}

// TxnMarkerWriter is an optional extension of a Broker: it writes one
// transaction marker to a partition this broker leads and returns once the
// in-sync replicas hold it (acks=all). Errors: ErrNotLeader,
// ErrUnknownTopicOrPartition, ErrNotEnoughReplicas,
// ErrInvalidProducerEpoch (the partition knows a newer producer epoch),
// ErrTransactionCoordinatorFenced (it knows a newer coordinator epoch for
// the producer), ErrRequestTimedOut. Safe for concurrent use.
type TxnMarkerWriter interface {
	WriteTxnMarker(ctx context.Context, topic string, partition int32, m TxnMarker) error
}

// TxnMarker is the end of one producer's transaction.
type TxnMarker struct {
	ProducerID       int64
	ProducerEpoch    int16
	CoordinatorEpoch int32
	Commit           bool // false: abort
}
