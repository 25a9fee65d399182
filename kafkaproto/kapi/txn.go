package kapi

import (
	"context"
	"time"
)

// TxnCoordinator is the optional part of a Broker that coordinates
// transactions (transactional producers and their offset commits). The
// listener finds it with a type assertion on its Broker; without it the
// transaction APIs answer COORDINATOR_NOT_AVAILABLE (FindCoordinator) or
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED (the rest): never a retriable code
// a client would retry forever.
//
// Every method is safe for concurrent use and returns once its change is
// durable (acks=all in __transaction_state) or ctx is done. Errors are
// matched with errors.Is against the sentinels in errors.go (TxnErr).
// InitProducerId with a transactional id goes to Admin's InitProducerID
// like any other.
type TxnCoordinator interface {
	// TxnCoordinatorID returns the node id of the broker coordinating
	// txnID: the leader of the __transaction_state partition it hashes
	// to. It may create that topic.
	TxnCoordinatorID(ctx context.Context, txnID string) (int32, error)
	// AddPartitionsToTxn adds partitions to the producer's transaction;
	// the result holds one error per partition (nil when added).
	AddPartitionsToTxn(ctx context.Context, p TxnProducer, parts []TopicPartition) ([]error, error)
	// AddOffsetsToTxn adds group's offsets partition to the transaction.
	AddOffsetsToTxn(ctx context.Context, p TxnProducer, group string) error
	// EndTxn commits (commit) or aborts the producer's transaction.
	EndTxn(ctx context.Context, p TxnProducer, commit bool) error
	// TxnCommitOffsets stages offsets of a group in the producer's
	// transaction (served by the group's coordinator): they become the
	// group's committed offsets when the transaction commits and are
	// dropped when it aborts. The result holds one error per offset.
	TxnCommitOffsets(ctx context.Context, p TxnProducer, m MemberRef, offsets []CommitOffset) ([]error, error)
	// DescribeTransactions describes transactional ids this broker
	// coordinates, one answer per id in order.
	DescribeTransactions(ctx context.Context, ids []string) []TxnDescription
	// ListTransactions lists the transactions this broker coordinates
	// that pass the filter.
	ListTransactions(ctx context.Context, f TxnFilter) ([]TxnListing, error)
	// PendingTxnOffset reports whether an open transaction has staged an
	// offset of group for t (OffsetFetch with RequireStable answers
	// UNSTABLE_OFFSET_COMMIT for it).
	PendingTxnOffset(group string, t TopicPartition) bool
}

// TxnProducer names a transactional producer as a request gives it.
type TxnProducer struct {
	TxnID string
	ID    int64
	Epoch int16
}

// TxnDescription is one transaction in DescribeTransactions; Err is set
// (and the rest zero) when the id is not coordinated here or unknown.
type TxnDescription struct {
	TxnID      string
	Err        error
	State      string // Kafka's names: Empty, Ongoing, PrepareCommit, ...
	Timeout    time.Duration
	StartMS    int64 // -1 when no transaction is open
	ProducerID int64
	Epoch      int16
	Partitions []TopicPartition
}

// TxnFilter selects transactions in ListTransactions: empty fields
// select all.
type TxnFilter struct {
	States      []string
	ProducerIDs []int64
	MinDuration time.Duration // open at least this long (v1+), 0: any
}

// TxnListing is one transaction in ListTransactions.
type TxnListing struct {
	TxnID      string
	ProducerID int64
	State      string
}

// TxnStates are Kafka's names of transaction states, as ListTransactions
// and DescribeTransactions use them.
var TxnStates = []string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"}
