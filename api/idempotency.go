package api

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// Idempotent produce (the IETF draft "The Idempotency-Key HTTP Header
// Field"). A produce carrying `Idempotency-Key: "<key>"` may be retried: the
// backend answers a retry of the same request with the original offsets and
// writes nothing. api parses the header, fingerprints what the request
// writes (IdempotencyKey.Digest), answers 409 to a retry that arrives while
// the same key is still being served on this node, and hands the rest to a
// backend implementing IdempotentProduceBackend; the backend makes the
// memory of a key durable and replicated (runnel keeps it in the record
// log, see server/idemkeys.go) and returns ErrIdempotencyKeyReused for the
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

// parseIdempotencyKey reads the Idempotency-Key header: absent is ok=false.
// The draft makes it an sf-string ("..."); a bare token is taken as well,
// since many clients send UUIDs without quotes.
func parseIdempotencyKey(r *http.Request) (string, bool, error) {
	vs := r.Header.Values(IdempotencyKeyHeader)
	if len(vs) == 0 {
		return "", false, nil
	}
	bad := func(msg string) error {
		return &FieldError{Field: "header." + IdempotencyKeyHeader, Err: ErrInvalidRequest, Msg: msg}
	}
	if len(vs) > 1 {
		return "", false, bad("must be sent once")
	}
	v := vs[0]
	if strings.HasPrefix(v, `"`) {
		u, err := strconv.Unquote(v)
		if err != nil {
			return "", false, bad("must be a structured-field string")
		}
		v = u
	}
	if len(v) == 0 || len(v) > MaxIdempotencyKeyLen {
		return "", false, bad(fmt.Sprintf("must be 1 to %d characters", MaxIdempotencyKeyLen))
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return "", false, bad("must be printable ASCII")
		}
	}
	return v, true, nil
}

// requestDigest fingerprints what a produce writes. Fields are length
// prefixed so that no two requests share an encoding.
func requestDigest(r *http.Request, topic, encoding string, body []byte) [32]byte {
	media := mediaType(r.Header.Get("Content-Type"))
	fields := []string{topic, media, encoding}
	if media == MediaOctetStream {
		// The record's key, headers, timestamp and partition travel
		// outside the body.
		fields = append(fields, r.URL.Query().Get("partition"), r.Header.Get(HeaderTimestamp))
		fields = append(fields, r.Header.Values(HeaderKey)...)
		fields = append(fields, "\x00headers")
		fields = append(fields, r.Header.Values(HeaderHeader)...)
	}
	h := sha256.New()
	for _, s := range fields {
		h.Write(binary.AppendUvarint(nil, uint64(len(s))))
		h.Write([]byte(s))
	}
	h.Write(body)
	var d [32]byte
	h.Sum(d[:0])
	return d
}

// inflightKeys is the set of idempotency keys being served by this node,
// so that a retry racing its original is told to wait (409, as the draft
// asks) instead of queueing behind it. Safe for concurrent use; its size is
// bounded by the requests in flight (connection limits).
type inflightKeys struct {
	mu   sync.Mutex
	keys map[string]struct{} // guarded by mu
}

func newInflightKeys() *inflightKeys { return &inflightKeys{keys: map[string]struct{}{}} }

// begin marks id in flight; false when it already is.
func (s *inflightKeys) begin(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.keys[id]; ok {
		return false
	}
	s.keys[id] = struct{}{}
	return true
}

func (s *inflightKeys) end(id string) {
	s.mu.Lock()
	delete(s.keys, id)
	s.mu.Unlock()
}

// produceBackend returns the call that appends recs: Produce, or
// ProduceIdempotent when the request carries an Idempotency-Key. done must
// be called when the request is answered.
func (rr recordsResource) produceBackend(r *http.Request, topic, encoding string, body []byte) (
	produce func(ctx context.Context, recs []ProduceRecord, acks int) ([]RecordOffset, error), done func(), err error) {
	key, ok, err := parseIdempotencyKey(r)
	if err != nil {
		return nil, nil, err
	}
	if !ok {
		return func(ctx context.Context, recs []ProduceRecord, acks int) ([]RecordOffset, error) {
			return rr.h.b.Produce(ctx, topic, recs, acks)
		}, func() {}, nil
	}
	ib, ok := rr.h.b.(IdempotentProduceBackend)
	if !ok {
		return nil, nil, fmt.Errorf("%w: %s on produce", ErrNotImplemented, IdempotencyKeyHeader)
	}
	ik := IdempotencyKey{Key: key, Principal: PrincipalFrom(r.Context()),
		Digest: requestDigest(r, topic, encoding, body)}
	id := ik.Principal + "\x00" + topic + "\x00" + key
	if !rr.h.idem.begin(id) {
		return nil, nil, fmt.Errorf("%w: a request with this key is still being served; retry once it is answered", ErrIdempotencyKeyInFlight)
	}
	return func(ctx context.Context, recs []ProduceRecord, acks int) ([]RecordOffset, error) {
		return ib.ProduceIdempotent(ctx, topic, recs, acks, ik)
	}, func() { rr.h.idem.end(id) }, nil
}
