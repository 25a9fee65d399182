// Package producerlog keeps a partition's memory of its producers (package
// producers' table of idempotent and transactional producers, and its
// index of HTTP idempotency keys) in line with the partition's log: it
// rebuilds them from the log's recent batches (Scan, LoadTable, Table.Load,
// Keys.Load: the bulk of the read without the partition's append lock),
// replays into them each batch a follower copies from its leader by the
// same rule (Replay, Keys.Replay), so a follower that becomes leader has
// them at once, and lists the producers a partition
// knows of with the transactions open in its log (Active, for Kafka's
// DescribeProducers).
//
// It reaches a partition only through a narrow interface: its log as a Log
// (a *segments.Log: offsets, timestamps, reads) and, for the loads, the
// partition's append lock as a sync.Locker. So the rebuilds are tested
// in-process against a real log (producerlog_test.go); the partition
// (server/broker's producerstate.go, idemkeys.go) checks and records each
// append against what it returns, under its append lock.
//
// Goroutines: none. Locks: none of its own. A Table or Keys is guarded by
// the append lock its owner passes in: Load takes it itself (the bulk of
// a rebuild reads the log without it; kept.go), the other methods run
// with it held. A table LoadTable returns is the caller's.
package producerlog
