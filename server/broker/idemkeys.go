package broker

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/runnel/runnel/recordbatch"
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
//     Kafka producer table (producerstate.go) ignores such batches, so keys
//     neither evict Kafka producers nor count against
//     --max-producer-ids-per-partition.
//   - The leader of a partition keeps a key index (keyID -> fingerprint,
//     base offset, record count, time) built from its log the first time a
//     keyed write reaches it since it became leader, restarted or followed
//     (truncated) — the same rule as the producer table — and updated on
//     every keyed append. A retry finds the key: same fingerprint, the
//     original offsets come back and nothing is written (acks=all still
//     waits for the in-sync replicas to hold them); another fingerprint is
//     errIdempotencyKeyReused (HTTP 422).
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
	// keyProducerIDBase starts the producer ids derived from keys.
	keyProducerIDBase = int64(1) << 62

	DefaultIdempotencyKeyExpiration       = 24 * time.Hour
	DefaultMaxIdempotencyKeysPerPartition = 100_000
	// keySweepEvery is how often an index drops expired keys.
	keySweepEvery = time.Minute
)

var ErrIdempotencyKeyReused = errors.New("idempotency key already used for a different request")

// isKeyProducerID reports whether id is in the range of ids derived from
// idempotency keys.
func isKeyProducerID(id int64) bool { return id >= keyProducerIDBase }

// IdemKey is an idempotency key as a batch carries it.
type IdemKey struct {
	ID  int64  // producerId: the key
	sum uint64 // 45 bits of the request digest: producerEpoch (15) + baseSequence (30)
}

// NewIdemKey derives the batch fields of a key. scope and key are the
// principal and the client's key; digest fingerprints the request.
func NewIdemKey(scope, key string, digest [32]byte) IdemKey {
	h := sha256.New()
	h.Write(binary.AppendUvarint(nil, uint64(len(scope))))
	h.Write([]byte(scope))
	h.Write([]byte(key))
	var k [32]byte
	h.Sum(k[:0])
	return IdemKey{
		ID:  keyProducerIDBase | int64(binary.BigEndian.Uint64(k[:8])>>2),
		sum: binary.BigEndian.Uint64(digest[:8]) & (1<<45 - 1),
	}
}

func (k IdemKey) epoch() int16 { return int16(k.sum & 0x7fff) }
func (k IdemKey) seq() int32   { return int32(k.sum >> 15) }

// keyOf reads the key a batch carries; ok false for other batches.
func keyOf(b BatchView) (IdemKey, bool) {
	if !isKeyProducerID(b.ProducerID) || b.IsControl() || b.epoch < 0 || b.firstSeq < 0 || b.firstSeq >= 1<<30 {
		return IdemKey{}, false
	}
	return IdemKey{ID: b.ProducerID, sum: uint64(b.epoch) | uint64(b.firstSeq)<<15}, true
}

// StampKey writes k into the producer fields of batch (one batch as
// recordbatch.Build makes it) and recomputes its CRC.
func StampKey(batch []byte, k IdemKey) {
	recordbatch.SetProducer(batch, k.ID, k.epoch(), k.seq())
}

// refuseKeyProducerIDs refuses batches a client sent under an id of the
// key range (only the HTTP door writes those).
func refuseKeyProducerIDs(views []BatchView) error {
	for _, b := range views {
		if isKeyProducerID(b.ProducerID) {
			return fmt.Errorf("%w: producer ids from %d up are reserved (HTTP Idempotency-Key); get one with InitProducerId",
				ErrUnknownProducerID, keyProducerIDBase)
		}
	}
	return nil
}

// KeyPolicy bounds the key index of every partition of a broker. Immutable.
type KeyPolicy struct {
	Expiration time.Duration // > 0
	MaxKeys    int           // > 0
}

var defaultKeyPolicy = &KeyPolicy{Expiration: DefaultIdempotencyKeyExpiration, MaxKeys: DefaultMaxIdempotencyKeysPerPartition}

// keyEntry is what a partition remembers of one key: 32 bytes.
type keyEntry struct {
	sum   uint64
	base  int64 // offset of the batch's first record
	at    int64 // unix ms: the batch's time, for expiry
	count int32 // records in the batch
}

// keyIndex is a partition leader's memory of idempotency keys. Guarded by
// the partition's appendMu.
type keyIndex struct {
	byID      map[int64]keyEntry
	policy    *KeyPolicy
	lastSweep time.Time
}

func newKeyIndex(policy *KeyPolicy) *keyIndex {
	return &keyIndex{byID: map[int64]keyEntry{}, policy: policy}
}

// lookup returns the live entry of id; an expired one is dropped.
func (x *keyIndex) lookup(id int64, now time.Time) (keyEntry, bool) {
	e, ok := x.byID[id]
	if ok && now.UnixMilli()-e.at > x.policy.Expiration.Milliseconds() {
		delete(x.byID, id)
		return keyEntry{}, false
	}
	return e, ok
}

// check returns the result of the batch k wrote before, if any, or
// errIdempotencyKeyReused when k was used for another request. count is
// the records of the batch the retry would write.
func (x *keyIndex) check(k IdemKey, count int32, now time.Time) (AppendResult, bool, error) {
	e, ok := x.lookup(k.ID, now)
	if !ok {
		return AppendResult{}, false, nil
	}
	if e.sum != k.sum || e.count != count {
		return AppendResult{}, false, fmt.Errorf("%w: the key wrote %d records at offset %d with another body", ErrIdempotencyKeyReused, e.count, e.base)
	}
	return AppendResult{BaseOffset: e.base, LastOffset: e.base + int64(e.count) - 1, LogAppendTime: -1, Duplicate: true}, true, nil
}

// record remembers the batch of k written at base (unix ms at).
func (x *keyIndex) record(k IdemKey, base int64, count int32, at int64, now time.Time) {
	if _, ok := x.lookup(k.ID, now); !ok {
		x.makeRoom(now)
	}
	x.byID[k.ID] = keyEntry{sum: k.sum, base: base, at: at, count: count}
}

// makeRoom drops expired keys (at most once per keySweepEvery, or when
// full) and, when still full, the oldest tenth, so a flood of new keys
// costs amortized O(log n) each.
func (x *keyIndex) makeRoom(now time.Time) {
	full := len(x.byID) >= x.policy.MaxKeys
	if !full && now.Sub(x.lastSweep) < keySweepEvery {
		return
	}
	x.lastSweep = now
	limit := now.UnixMilli() - x.policy.Expiration.Milliseconds()
	for id, e := range x.byID {
		if e.at < limit {
			delete(x.byID, id)
		}
	}
	if len(x.byID) < x.policy.MaxKeys {
		return
	}
	type aged struct{ id, at int64 }
	all := make([]aged, 0, len(x.byID))
	for id, e := range x.byID {
		all = append(all, aged{id, e.at})
	}
	slices.SortFunc(all, func(a, b aged) int { return cmp.Compare(a.at, b.at) })
	drop := len(all) - x.policy.MaxKeys + 1 + x.policy.MaxKeys/10
	for _, a := range all[:min(drop, len(all))] {
		delete(x.byID, a.id)
	}
}

func (p *Partition) keyPolicy() *KeyPolicy {
	if p.keyPolicyCfg != nil {
		return p.keyPolicyCfg
	}
	return defaultKeyPolicy
}

// checkKeyLocked answers a keyed append that repeats one already stored.
// The caller loaded the index (loadKeys) before taking appendMu; if it was
// reset since, it is rebuilt here, under the lock.
func (p *Partition) checkKeyLocked(k *IdemKey, views []BatchView, now time.Time) (AppendResult, bool, error) {
	if k == nil {
		return AppendResult{}, false, nil
	}
	if len(views) != 1 {
		return AppendResult{}, false, fmt.Errorf("%w: a keyed append is one batch", recordbatch.ErrCorruptBatch)
	}
	if err := p.loadKeysLocked(now); err != nil {
		return AppendResult{}, false, err
	}
	res, dup, err := p.keys.check(*k, views[0].lastDelta+1, now)
	if dup {
		res.LogStart = p.log().StartOffset()
	}
	return res, dup, err
}

// recordKeyLocked remembers the keyed batch just appended at base.
func (p *Partition) recordKeyLocked(k *IdemKey, views []BatchView, base int64, now time.Time) {
	if k == nil || p.keys == nil {
		return
	}
	p.keys.record(*k, base, views[0].lastDelta+1, now.UnixMilli(), now)
}

// resetKeysLocked drops the key index when the log changed under it (a
// follower's append, truncation or reset); the next leader write rebuilds it.
func (p *Partition) resetKeysLocked() {
	p.keys = nil
	p.keysGen++
}

// loadKeys rebuilds the key index from the log the first time a keyed
// write reaches this partition since it was opened or last followed a
// leader: it reads the batches younger than the expiration. The bulk of
// the read runs without appendMu, so other writes to the partition go on;
// only the batches appended meanwhile are read under it.
func (p *Partition) loadKeys(now time.Time) error {
	p.appendMu.Lock()
	loaded, gen, end := p.keys != nil, p.keysGen, p.log().EndOffset()
	p.appendMu.Unlock()
	if loaded {
		return nil
	}
	x := newKeyIndex(p.keyPolicy())
	since := now.Add(-x.policy.Expiration)
	err := p.scanLog(since, end, x.rebuildFn(now))
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	switch {
	case p.keys != nil:
		return nil // another write loaded it meanwhile
	case err != nil || gen != p.keysGen:
		// The log changed under the read (or it failed): read it
		// again, whole, under the lock.
		return p.loadKeysLocked(now)
	}
	if err := p.scanLog(time.UnixMilli(0), p.log().EndOffset(), x.rebuildFn(now), end); err != nil {
		return fmt.Errorf("rebuild idempotency keys of %s-%d: %w", p.Topic, p.Index, err)
	}
	p.keys = x
	return nil
}

// loadKeysLocked is loadKeys with appendMu held throughout.
func (p *Partition) loadKeysLocked(now time.Time) error {
	if p.keys != nil {
		return nil
	}
	x := newKeyIndex(p.keyPolicy())
	if err := p.scanLog(now.Add(-x.policy.Expiration), p.log().EndOffset(), x.rebuildFn(now)); err != nil {
		return fmt.Errorf("rebuild idempotency keys of %s-%d: %w", p.Topic, p.Index, err)
	}
	p.keys = x
	return nil
}

// rebuildFn records the keyed batches a log scan meets.
func (x *keyIndex) rebuildFn(now time.Time) func(BatchView) {
	return func(b BatchView) {
		if k, ok := keyOf(b); ok {
			// The batch's own time, capped: a client clock in the
			// future must not keep a key forever.
			x.record(k, b.baseOffset, b.lastDelta+1, min(b.maxTS, now.UnixMilli()), now)
		}
	}
}

// scanLog calls fn for every batch below end from the first one with a
// timestamp at or after since (and at or after from[0] when given).
func (p *Partition) scanLog(since time.Time, end int64, fn func(BatchView), from ...int64) error {
	off, _, ok, err := p.log().OffsetForTimestamp(since.UnixMilli())
	if err != nil || !ok {
		return err
	}
	for _, f := range from {
		off = max(off, f)
	}
	for off = max(off, p.log().StartOffset()); off < end; {
		chunk, err := p.log().Read(off, 1<<20, end)
		if err != nil {
			return fmt.Errorf("at %d: %w", off, err)
		}
		data, err := chunk.Bytes()
		chunk.Close()
		if err != nil {
			return fmt.Errorf("at %d: %w", off, err)
		}
		next := off
		err = SplitBatches(data, func(b BatchView) error {
			fn(b)
			next = b.lastOffset() + 1
			return nil
		})
		if err != nil {
			return err
		}
		if next <= off {
			break
		}
		off = next
	}
	return nil
}

// idemKeyHeader carries a key from the node that took a request to the
// partition leader it forwards to. Honored only on the inter-node port
// (httpdoor.MarkForwarded), so a client cannot write under a key it did not send.
const IdemKeyHeader = "X-Runnel-Idempotency"

func (k IdemKey) String() string { return fmt.Sprintf("%d.%d", k.ID, k.sum) }

type idemKeyCtx struct{}

// WithForwardedIdemKey adds the key of a forwarded request (the header's
// value; "" or malformed: none) to ctx.
func WithForwardedIdemKey(ctx context.Context, v string) context.Context {
	a, b, ok := strings.Cut(v, ".")
	id, err1 := strconv.ParseInt(a, 10, 64)
	sum, err2 := strconv.ParseUint(b, 10, 64)
	if !ok || err1 != nil || err2 != nil || !isKeyProducerID(id) || sum >= 1<<45 {
		return ctx
	}
	return context.WithValue(ctx, idemKeyCtx{}, &IdemKey{ID: id, sum: sum})
}

// ForwardedIdemKey is the key withForwardedIdemKey stored; nil: none.
func ForwardedIdemKey(ctx context.Context) *IdemKey {
	k, _ := ctx.Value(idemKeyCtx{}).(*IdemKey)
	return k
}

// PeekKeys refuses a reused key on this node's partitions before any of
// them is written, so such a request writes nothing here.
func PeekKeys(parts map[int32]*Partition, byPart map[int32][]recordbatch.NewRecord, k *IdemKey) error {
	if k == nil {
		return nil
	}
	for part, p := range parts {
		if err := p.peekKey(*k, int32(len(byPart[part])), p.wallNow()); err != nil {
			return err
		}
	}
	return nil
}

func (p *Partition) peekKey(k IdemKey, count int32, now time.Time) error {
	if err := p.loadKeys(now); err != nil {
		return err
	}
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	if err := p.loadKeysLocked(now); err != nil {
		return err
	}
	_, _, err := p.keys.check(k, count, now)
	return err
}
