// Package txn is runnel's transaction coordinator: it gives transactional
// producers their id and epoch, tracks the partitions and group offsets of
// each open transaction, and ends transactions by having commit or abort
// markers written into every partition they touched.
//
// # State machine (one per transactional id, Kafka's)
//
//	Empty ──AddPartitions──► Ongoing ──EndTxn(commit)──► PrepareCommit ──markers──► CompleteCommit
//	  ▲                        │  └───EndTxn(abort)/timeout──► PrepareAbort ──markers──► CompleteAbort
//	  └──InitProducerId────────┴── (an Ongoing one is aborted first, with a bumped epoch)
//
// CompleteCommit and CompleteAbort behave as Empty for the next
// transaction. InitProducerId bumps the epoch (a new producer id when the
// epoch would overflow), which fences a zombie with the old epoch:
// PRODUCER_FENCED. Requests while markers are being written answer
// CONCURRENT_TRANSACTIONS (clients retry); EndTxn in the wrong state
// INVALID_TXN_STATE. An Ongoing transaction older than its timeout is
// aborted with a bumped epoch. An id idle (not Ongoing, not preparing)
// longer than Config.IDExpiration is forgotten (a tombstone).
//
// # Where the state lives
//
// Every transition is one record in the compacted internal topic
// __transaction_state, appended acks=all before it takes effect (StateLog).
// The coordinator of id x is the leader of partition Partition(x, n); the
// server calls Follow with the partitions it leads. A partition newly led
// is loaded from its start (requests for its ids answer
// COORDINATOR_LOAD_IN_PROGRESS meanwhile); transactions found in
// PrepareCommit or PrepareAbort are completed (markers written again:
// writing a marker twice is harmless). Records:
//
//	key   int16 version (0), then the transactional id's UTF-8 bytes
//	value a JSON object, "v" its version (1); null is a tombstone:
//	      {"v","pid","epoch","last_pid","last_epoch","timeout_ms","state",
//	       "partitions":[{"topic","partition"}],"start_ms","update_ms"}
//
// # Offsets in transactions
//
// AddOffsetsToTxn adds the group's __consumer_offsets partition to the
// transaction like any other. TxnOffsetCommit goes to the group's
// coordinator, which stores the offsets as staged records of that
// partition (package server/groups, txnoffsets.go: they survive its
// failover); the marker this coordinator has written to that partition
// makes them the group's committed offsets (commit) or drops them.
//
// # Goroutines and locks
//
// run (Start/Close) ticks timeouts and expiry. Each transaction being
// completed has one goroutine writing its markers, owned by the
// coordinator (cancelled when its partition is unloaded or on Close).
// Lock order: Coordinator.mu, then entry.mu. entry.mu is held across the
// acks=all append of that id's record (so records are in the order of the
// changes) but never across marker writes; Coordinator.mu is never held
// across I/O.
package txn
