// Package producers is a partition's memory of who wrote what: the Kafka
// producer table of idempotent and transactional producers (table.go:
// epochs, the last batches' sequence numbers and offsets, the transaction
// coordinator epoch of the last marker) and the index of HTTP idempotency
// keys (keys.go: the key's batch fields, its offsets and request
// fingerprint), both bounded by count and idle time with the one eviction
// rule (bounded.go).
//
// The broker calls it with a narrow interface: Check a batch before an
// append (a duplicate's original offsets, or the refusal), Record it after,
// CheckMarker and Marker for transaction markers, and rebuilds a table or
// index from its log (Record per batch read, package producerlog), or a
// follower keeps one by the same calls per batch it copies; Equal tells
// whether two hold the same producers or keys. It knows nothing of logs, partitions or the wire: a Batch is the
// few header fields it needs.
//
// Goroutines: none. Locks: none; a Table or KeyIndex is not safe for
// concurrent use, and the owning partition's append lock guards it.
package producers
