package kafkaproto

import "context"

// txnCoordinator returns the broker's TxnCoordinator, or nil.
func (s *Server) txnCoordinator() TxnCoordinator {
	tc, _ := s.broker.(TxnCoordinator)
	return tc
}

// errNoTxnCoordinator: a broker without transactions. Not retriable, so a
// transactional client fails instead of waiting forever.
var errNoTxnCoordinator = ErrTransactionsUnsupported

// pendingTxnOffset is TxnCoordinator.PendingTxnOffset; false without one.
func (s *Server) pendingTxnOffset(group string, t TopicPartition) bool {
	tc := s.txnCoordinator()
	return tc != nil && tc.PendingTxnOffset(group, t)
}

// mayDescribeTxn reports whether the connection's principal may describe
// txnID (ListTransactions leaves out the others, as Kafka does).
func (s *Server) mayDescribeTxn(ctx context.Context, txnID string) bool {
	return s.Authorized(ctx, "transactional_id", txnID, "describe")
}
