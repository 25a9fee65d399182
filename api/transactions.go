package api

import (
	"context"
)

// TransactionsBackend is optionally implemented by a Backend with a
// transaction coordinator: GET /v1/transactions. Safe for concurrent use.
type TransactionsBackend interface {
	// ListTransactions describes the transactional ids of every broker's
	// coordinator, sorted by id; state, when not empty, keeps only those
	// in that state (Kafka's names: Ongoing, CompleteCommit, ...).
	ListTransactions(ctx context.Context, state string) ([]Transaction, error)
}

// Transaction is one transactional id (Kafka's DescribeTransactions).
type Transaction struct {
	TransactionalID string           `json:"transactional_id"`
	State           string           `json:"state"`
	ProducerID      int64            `json:"producer_id"`
	ProducerEpoch   int16            `json:"producer_epoch"`
	TimeoutMS       int64            `json:"timeout_ms"`
	StartMS         int64            `json:"start_ms"` // -1: no transaction open
	Coordinator     int32            `json:"coordinator"`
	Partitions      []TopicPartition `json:"partitions"`
}

// TopicPartition names a partition.
type TopicPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

// TransactionList is the body of GET /v1/transactions.
type TransactionList struct {
	Transactions []Transaction `json:"transactions"`
}
