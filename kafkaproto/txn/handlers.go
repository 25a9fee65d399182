package txn

import (
	"context"

	"github.com/runnel/runnel/kafkaproto/kapi"
)

// Handlers lists the transaction APIs with the versions they serve, by key; the
// listener's table (kafkaproto/handlers.go) takes them in. Each entry's
// constants and functions live in the file named after the API.
func Handlers() []kapi.Handler {
	return []kapi.Handler{
		kapi.Handle(addPartitionsToTxnKey, addPartitionsToTxnMin, addPartitionsToTxnMax, addPartitionsToTxn, addPartitionsToTxnError),
		kapi.Handle(addOffsetsToTxnKey, addOffsetsToTxnMin, addOffsetsToTxnMax, addOffsetsToTxn, addOffsetsToTxnError),
		kapi.Handle(endTxnKey, endTxnMin, endTxnMax, endTxn, endTxnError),
		kapi.Handle(txnOffsetCommitKey, txnOffsetCommitMin, txnOffsetCommitMax, txnOffsetCommit, txnOffsetCommitError),
		kapi.Handle(describeTransactionsKey, describeTransactionsMin, describeTransactionsMax, describeTransactions, describeTransactionsError),
		kapi.Handle(listTransactionsKey, listTransactionsMin, listTransactionsMax, listTransactions, listTransactionsError),
	}
}

// txnCoordinator returns the broker's TxnCoordinator, or nil.
func txnCoordinator(env kapi.Env) kapi.TxnCoordinator {
	tc, _ := env.Broker().(kapi.TxnCoordinator)
	return tc
}

// errNoTxnCoordinator: a broker without transactions. Not retriable, so a
// transactional client fails instead of waiting forever.
var errNoTxnCoordinator = kapi.ErrTransactionsUnsupported

// mayDescribeTxn reports whether the connection's principal may describe
// txnID (ListTransactions leaves out the others, as Kafka does).
func mayDescribeTxn(env kapi.Env, ctx context.Context, txnID string) bool {
	return env.Authorized(ctx, "transactional_id", txnID, "describe")
}
