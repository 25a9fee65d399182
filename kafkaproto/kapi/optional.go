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
	AppendForAcks(ctx context.Context, topic string, partition int32, batches []byte) (ProduceResult, func(context.Context) error, error)
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
