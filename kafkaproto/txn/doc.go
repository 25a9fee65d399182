// Package txn serves the transaction APIs of runnel's Kafka listener that
// the transaction coordinator answers: AddPartitionsToTxn, AddOffsetsToTxn,
// EndTxn, TxnOffsetCommit, DescribeTransactions and ListTransactions.
// (InitProducerId, which every idempotent producer sends, and
// WriteTxnMarkers, a partition leader's side, stay in kafkaproto; a
// coordinator is found with FindCoordinator, in kafkaproto/groups.) Each
// file is one API key, opening with the versions it serves; handlers.go
// lists them (Handlers), and the listener's table (kafkaproto/handlers.go)
// takes them in. A handler reaches the coordinator as the Broker's optional
// kapi.TxnCoordinator (without one the APIs answer
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED, which clients do not retry) and
// maps its errors with kapi.TxnErr.
//
// # Files
//
//	handlers.go   Handlers: the transaction API keys and versions; the coordinator
//	              lookup and ListTransactions' describe check
//	<api>.go      one per API key: addpartitionstotxn, addoffsetstotxn, endtxn,
//	              txnoffsetcommit, describetransactions, listtransactions
//
// # Goroutines and locks
//
// None of its own: handlers run on the goroutine of the connection that
// calls them, hold no lock and keep no state between requests; the
// coordinator returns once its change is durable or the listener's context
// ends. It imports only kafkaproto/kapi of the project.
package txn
