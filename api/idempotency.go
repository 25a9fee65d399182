package api

import (
	"context"
)

// Idempotent produce (the IETF draft "The Idempotency-Key HTTP Header
// Field"). A produce carrying `Idempotency-Key: "<key>"` may be retried: the
// backend answers a retry of the same request with the original offsets and
// writes nothing. api parses the header, fingerprints what the request
// writes (IdempotencyKey.Digest), answers 409 to a retry that arrives while
// the same key is still being served on this node, and hands the rest to a
// backend implementing IdempotentProduceBackend; the backend makes the
// memory of a key durable and replicated (runnel keeps it in the record
// log, see server/broker/producers/keys.go) and returns ErrIdempotencyKeyReused for the
// same key with a different request.

// IdempotencyKeyHeader is the request header naming a retryable produce.
const IdempotencyKeyHeader = "Idempotency-Key"

// MaxIdempotencyKeyLen bounds the header value (a UUID is 36 bytes).
const MaxIdempotencyKeyLen = 256

// IdempotencyKey identifies one produce request a client may retry.
type IdempotencyKey struct {
	// Key is the header's value (an sf-string, unquoted), 1 to
	// MaxIdempotencyKeyLen printable ASCII bytes.
	Key string
	// Principal is the authenticated principal ("" without one): keys of
	// different principals never meet.
	Principal string
	// Digest is the SHA-256 of everything that decides what the request
	// writes: topic, media type, encoding and the body bytes (and, for an
	// octet-stream body, its Runnel-Key, Runnel-Header and Runnel-Timestamp
	// headers and partition). A retry must match it byte for byte.
	Digest [32]byte
}

// IdempotentProduceBackend is optionally implemented by a Backend that can
// remember produce requests by Idempotency-Key. Without it a request with
// the header is answered 501. Safe for concurrent use.
//
// ProduceIdempotent is Produce, except that when key was already served
// with the same Digest it returns the offsets it returned then and writes
// nothing; a key served with another Digest is ErrIdempotencyKeyReused
// (and nothing is written to the partitions the key was served on).
type IdempotentProduceBackend interface {
	ProduceIdempotent(ctx context.Context, topic string, records []ProduceRecord, acks int, key IdempotencyKey) ([]RecordOffset, error)
}
