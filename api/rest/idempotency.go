package rest

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/runnel/runnel/api"
)

// parseIdempotencyKey reads the Idempotency-Key header: absent is ok=false.
// The draft makes it an sf-string ("..."); a bare token is taken as well,
// since many clients send UUIDs without quotes.
func parseIdempotencyKey(r *http.Request) (string, bool, error) {
	vs := r.Header.Values(api.IdempotencyKeyHeader)
	if len(vs) == 0 {
		return "", false, nil
	}
	bad := func(msg string) error {
		return &api.FieldError{Field: "header." + api.IdempotencyKeyHeader, Err: api.ErrInvalidRequest, Msg: msg}
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
	if len(v) == 0 || len(v) > api.MaxIdempotencyKeyLen {
		return "", false, bad(fmt.Sprintf("must be 1 to %d characters", api.MaxIdempotencyKeyLen))
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
	if media == api.MediaOctetStream {
		// The record's key, headers, timestamp and partition travel
		// outside the body.
		fields = append(fields, r.URL.Query().Get("partition"), r.Header.Get(api.HeaderTimestamp))
		fields = append(fields, r.Header.Values(api.HeaderKey)...)
		fields = append(fields, "\x00headers")
		fields = append(fields, r.Header.Values(api.HeaderHeader)...)
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
	produce func(ctx context.Context, recs []api.ProduceRecord, acks int) ([]api.RecordOffset, error), done func(), err error) {
	key, ok, err := parseIdempotencyKey(r)
	if err != nil {
		return nil, nil, err
	}
	if !ok {
		return func(ctx context.Context, recs []api.ProduceRecord, acks int) ([]api.RecordOffset, error) {
			return rr.h.b.Produce(ctx, topic, recs, acks)
		}, func() {}, nil
	}
	ib, ok := rr.h.b.(api.IdempotentProduceBackend)
	if !ok {
		return nil, nil, fmt.Errorf("%w: %s on produce", api.ErrNotImplemented, api.IdempotencyKeyHeader)
	}
	ik := api.IdempotencyKey{Key: key, Principal: api.PrincipalFrom(r.Context()),
		Digest: requestDigest(r, topic, encoding, body)}
	id := ik.Principal + "\x00" + topic + "\x00" + key
	if !rr.h.idem.begin(id) {
		return nil, nil, fmt.Errorf("%w: a request with this key is still being served; retry once it is answered", api.ErrIdempotencyKeyInFlight)
	}
	return func(ctx context.Context, recs []api.ProduceRecord, acks int) ([]api.RecordOffset, error) {
		return ib.ProduceIdempotent(ctx, topic, recs, acks, ik)
	}, func() { rr.h.idem.end(id) }, nil
}
