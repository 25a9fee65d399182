package producers

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Idempotent HTTP produce (Idempotency-Key). How a key is made durable and
// replicated: the record log is the only state that is both replicated to
// every in-sync replica and survives a kill -9 and a failover, so the
// memory of a key lives in the batches it wrote, not beside them.
//
//   - Every batch written for a keyed request carries, in its producer
//     fields, the key and the request's fingerprint: producerId =
//     2^62 + the first 62 bits of SHA-256(principal, key); producerEpoch and
//     baseSequence hold 45 bits of the SHA-256 of what the request writes
//     (topic, media type, encoding, body; api.IdempotencyKey.Digest). Kafka
//     consumers see an ordinary non-transactional batch; no record, header
//     or offset is added.
//   - Producer ids from keys live in [2^62, 2^63). The controller allocates
//     Kafka producer ids from 0 upward (a block of 1000 per burst of
//     InitProducerId), so the ranges never meet; the Kafka door refuses a
//     batch under an id in the key range (UNKNOWN_PRODUCER_ID), and the
//     Kafka producer table (table.go) never sees such batches, so keys
//     neither evict Kafka producers nor count against
//     --max-producer-ids-per-partition.
//   - The leader of a partition keeps a key index (keyID -> fingerprint,
//     base offset, record count, time) built from its log the first time a
//     keyed write reaches it since it became leader, restarted or followed
//     (truncated) — the same rule as the producer table — and updated on
//     every keyed append. A retry finds the key: same fingerprint, the
//     original offsets come back and nothing is written (acks=all still
//     waits for the in-sync replicas to hold them); another fingerprint is
//     ErrIdempotencyKeyReused (HTTP 422).
//   - One request can touch several partitions (records placed by key).
//     Placement is a function of the body (records without key or
//     partition go to the partition the key hashes to, not the sticky
//     one), so a retry sends each partition the same records, and each
//     partition answers for its own batch: written now, or the original.
//     The answer is assembled exactly as the first one was.
//
// Limits: a key is remembered --idempotency-key-expiration (default 24 h,
// by the batch's timestamp) and a partition remembers at most
// --max-idempotency-keys-per-partition keys (the oldest dropped first), and
// only while the batch is in the log (retention, compaction). A different
// request under a used key is refused on every partition the key wrote to;
// records of it for partitions the first request never wrote to are
// written before the refusal is known (documented in README).

const (
	// KeyIDBase starts the producer ids derived from keys.
	KeyIDBase = int64(1) << 62

	DefaultKeyExpiration       = 24 * time.Hour
	DefaultMaxKeysPerPartition = 100_000
)

var ErrIdempotencyKeyReused = errors.New("idempotency key already used for a different request")

// IsKeyID reports whether id is in the range of ids derived from
// idempotency keys.
func IsKeyID(id int64) bool { return id >= KeyIDBase }

// Key is an idempotency key as a batch carries it.
type Key struct {
	ID  int64  // producerId: the key
	sum uint64 // 45 bits of the request digest: producerEpoch (15) + baseSequence (30)
}

// NewKey derives the batch fields of a key. scope and key are the
// principal and the client's key; digest fingerprints the request.
func NewKey(scope, key string, digest [32]byte) Key {
	h := sha256.New()
	h.Write(binary.AppendUvarint(nil, uint64(len(scope))))
	h.Write([]byte(scope))
	h.Write([]byte(key))
	var k [32]byte
	h.Sum(k[:0])
	return Key{
		ID:  KeyIDBase | int64(binary.BigEndian.Uint64(k[:8])>>2),
		sum: binary.BigEndian.Uint64(digest[:8]) & (1<<45 - 1),
	}
}

// Epoch and Seq are the producerEpoch and baseSequence a keyed batch
// carries.
func (k Key) Epoch() int16 { return int16(k.sum & 0x7fff) }
func (k Key) Seq() int32   { return int32(k.sum >> 15) }

// KeyOf reads the key a batch carries in its producer fields; ok false
// for other batches (control is the batch's control flag).
func KeyOf(producerID int64, epoch int16, firstSeq int32, control bool) (Key, bool) {
	if !IsKeyID(producerID) || control || epoch < 0 || firstSeq < 0 || firstSeq >= 1<<30 {
		return Key{}, false
	}
	return Key{ID: producerID, sum: uint64(epoch) | uint64(firstSeq)<<15}, true
}

// KeyPolicy bounds the key index of every partition of a broker. Immutable.
type KeyPolicy struct {
	Expiration time.Duration // > 0
	MaxKeys    int           // > 0
}

// DefaultKeyPolicy is the policy of partitions made without one (tests).
var DefaultKeyPolicy = &KeyPolicy{Expiration: DefaultKeyExpiration, MaxKeys: DefaultMaxKeysPerPartition}

// keyEntry is what a partition remembers of one key: 32 bytes.
type keyEntry struct {
	sum   uint64
	base  int64 // offset of the batch's first record
	at    int64 // unix ms: the batch's time, for expiry
	count int32 // records in the batch
}

func keyTime(e keyEntry) int64 { return e.at }

// KeyIndex is a partition leader's memory of idempotency keys. Not safe for
// concurrent use: the partition's append lock guards it.
type KeyIndex struct {
	keys   bounded[keyEntry]
	policy *KeyPolicy
}

// NewKeyIndex makes an empty index bounded by policy.
func NewKeyIndex(policy *KeyPolicy) *KeyIndex {
	return &KeyIndex{keys: newBounded(keyTime), policy: policy}
}

// Len is the number of keys held.
func (x *KeyIndex) Len() int { return len(x.keys.byID) }

// Expiration is how long the index remembers a key.
func (x *KeyIndex) Expiration() time.Duration { return x.policy.Expiration }

func (x *KeyIndex) lookup(id int64, now time.Time) (keyEntry, bool) {
	return x.keys.lookup(id, now, x.policy.Expiration)
}

// Check returns the offsets of the batch k wrote before (dup true), if
// any, or ErrIdempotencyKeyReused when k was used for another request.
// count is the records of the batch the retry would write.
func (x *KeyIndex) Check(k Key, count int32, now time.Time) (base, last int64, dup bool, err error) {
	e, ok := x.lookup(k.ID, now)
	if !ok {
		return 0, 0, false, nil
	}
	if e.sum != k.sum || e.count != count {
		return 0, 0, false, fmt.Errorf("%w: the key wrote %d records at offset %d with another body", ErrIdempotencyKeyReused, e.count, e.base)
	}
	return e.base, e.base + int64(e.count) - 1, true, nil
}

// Record remembers the batch of k written at base (unix ms at).
func (x *KeyIndex) Record(k Key, base int64, count int32, at int64, now time.Time) {
	if _, ok := x.lookup(k.ID, now); !ok {
		x.keys.makeRoom(now, x.policy.Expiration, x.policy.MaxKeys)
	}
	x.keys.set(k.ID, keyEntry{sum: k.sum, base: base, at: at, count: count})
}

// Equal reports whether x and y hold the same live keys at now, each with
// the same request, offsets and time (Table.Equal's counterpart).
func (x *KeyIndex) Equal(y *KeyIndex, now time.Time) bool {
	return x.keys.equal(&y.keys, now, x.policy.Expiration, func(a, b keyEntry) bool { return a == b })
}

// KeyHeader carries a key from the node that took a request to the
// partition leader it forwards to. Honored only on the inter-node port
// (httpdoor.MarkForwarded), so a client cannot write under a key it did not send.
const KeyHeader = "X-Runnel-Idempotency"

func (k Key) String() string { return fmt.Sprintf("%d.%d", k.ID, k.sum) }

type keyCtx struct{}

// WithForwardedKey adds the key of a forwarded request (the header's
// value; "" or malformed: none) to ctx.
func WithForwardedKey(ctx context.Context, v string) context.Context {
	a, b, ok := strings.Cut(v, ".")
	id, err1 := strconv.ParseInt(a, 10, 64)
	sum, err2 := strconv.ParseUint(b, 10, 64)
	if !ok || err1 != nil || err2 != nil || !IsKeyID(id) || sum >= 1<<45 {
		return ctx
	}
	return context.WithValue(ctx, keyCtx{}, &Key{ID: id, sum: sum})
}

// ForwardedKey is the key WithForwardedKey stored; nil: none.
func ForwardedKey(ctx context.Context) *Key {
	k, _ := ctx.Value(keyCtx{}).(*Key)
	return k
}
