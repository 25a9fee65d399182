package rest_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/api/rest"
)

// idemBackend records the keys it is given and can hold a request until
// released.
type idemBackend struct {
	fullBackend
	mu      sync.Mutex
	keys    []api.IdempotencyKey
	entered chan struct{} // receives when a held request started
	release chan struct{} // closed to let held requests go
}

func (b *idemBackend) ProduceIdempotent(ctx context.Context, topic string, recs []api.ProduceRecord, acks int, k api.IdempotencyKey) ([]api.RecordOffset, error) {
	b.mu.Lock()
	b.keys = append(b.keys, k)
	b.mu.Unlock()
	if k.Key == "hold" {
		b.entered <- struct{}{}
		<-b.release
	}
	return b.Produce(ctx, topic, recs, acks)
}

func newIdemEnv(t *testing.T) (*env, *idemBackend) {
	var ib *idemBackend
	e := newEnv(t, func(_ *rest.Options, m *memBackend) api.Backend {
		ib = &idemBackend{fullBackend: fullBackend{m}, entered: make(chan struct{}, 1), release: make(chan struct{})}
		return ib
	})
	e.do("POST", "/v1/topics", `{"name":"t","partitions":2}`)
	return e, ib
}

// The header is parsed (sf-string or bare), bounded, and what decides the
// request's digest is the topic, media type, encoding and body.
func TestIdempotencyKeyHeader(t *testing.T) {
	e, b := newIdemEnv(t)
	body := `{"records":[{"value":"a"}]}`
	for _, key := range []string{`"k-1"`, `k-1`, `"k-1"`} {
		if r := e.do("POST", "/v1/topics/t/records", body, "Idempotency-Key", key); r.status != 200 {
			t.Fatalf("key %s: %d %s", key, r.status, r.body)
		}
	}
	e.do("POST", "/v1/topics/t/records?encoding=string", body, "Idempotency-Key", "k-1")
	e.do("POST", "/v1/topics/t/records", `{"records":[{"value":"b"}]}`, "Idempotency-Key", "k-1")
	if len(b.keys) != 5 {
		t.Fatalf("%d keyed calls, want 5", len(b.keys))
	}
	for i := 1; i < 3; i++ {
		if b.keys[i] != b.keys[0] || b.keys[i].Key != "k-1" {
			t.Fatalf("same request, keys %+v and %+v", b.keys[0], b.keys[i])
		}
	}
	if b.keys[3].Digest == b.keys[0].Digest || b.keys[4].Digest == b.keys[0].Digest || b.keys[3].Digest == b.keys[4].Digest {
		t.Fatal("another encoding or body has the same digest")
	}
	// An octet-stream record's key, headers, timestamp and partition are
	// outside the body: they count as much as the body.
	octet := func(hdr ...string) api.IdempotencyKey {
		t.Helper()
		r := e.do("POST", "/v1/topics/t/records", "v", append([]string{"Content-Type", "application/octet-stream", "Idempotency-Key", "o"}, hdr...)...)
		if r.status != 200 {
			t.Fatalf("octet-stream %v: %d %s", hdr, r.status, r.body)
		}
		return b.keys[len(b.keys)-1]
	}
	base := octet(api.HeaderKey, "a")
	if octet(api.HeaderKey, "a") != base {
		t.Fatal("the same octet-stream request has another digest")
	}
	for _, hdr := range [][]string{{api.HeaderKey, "b"}, {api.HeaderKey, "a", api.HeaderHeader, "h=1"}, {api.HeaderKey, "a", api.HeaderTimestamp, "5"}} {
		if octet(hdr...).Digest == base.Digest {
			t.Fatalf("octet-stream with %v has the digest of another request", hdr)
		}
	}
	b.keys = b.keys[:5]
	for _, bad := range []string{`""`, `"unterminated`, strings.Repeat("x", api.MaxIdempotencyKeyLen+1), "tab\there"} {
		r := e.do("POST", "/v1/topics/t/records", body, "Idempotency-Key", bad)
		if p := r.problem(t); r.status != 400 || !strings.HasSuffix(p.Type, "invalid-request") {
			t.Fatalf("key %q: %d %+v", bad, r.status, p)
		}
	}
	if len(b.keys) != 5 {
		t.Fatal("a request with a bad key reached the backend")
	}
}

// A request whose key is being served is answered 409 at once; when the
// first is answered the key is free again.
func TestIdempotencyKeyInFlightConflict(t *testing.T) {
	e, b := newIdemEnv(t)
	body := `{"records":[{"value":"a"}]}`
	done := make(chan resp, 1)
	go func() {
		done <- e.do("POST", "/v1/topics/t/records", body, "Idempotency-Key", "hold")
	}()
	<-b.entered
	r := e.do("POST", "/v1/topics/t/records", body, "Idempotency-Key", "hold")
	if p := r.problem(t); r.status != http.StatusConflict || !strings.HasSuffix(p.Type, "idempotency-key-in-flight") {
		t.Fatalf("retry in flight: %d %+v", r.status, p)
	}
	if r := e.do("POST", "/v1/topics/t/records", body, "Idempotency-Key", "other"); r.status != 200 {
		t.Fatalf("another key while one is held: %d %s", r.status, r.body)
	}
	close(b.release)
	if r := <-done; r.status != 200 {
		t.Fatalf("held request: %d %s", r.status, r.body)
	}
	b.entered = make(chan struct{}, 1) // the key is free: the next one is held and released at once
	if r := e.do("POST", "/v1/topics/t/records", body, "Idempotency-Key", "hold"); r.status != 200 {
		t.Fatalf("after the first was answered: %d %s", r.status, r.body)
	}
}

// A backend that cannot remember keys says so instead of writing twice.
func TestIdempotencyKeyNotImplemented(t *testing.T) {
	e := newEnv(t)
	e.do("POST", "/v1/topics", `{"name":"t","partitions":1}`)
	r := e.do("POST", "/v1/topics/t/records", `{"records":[{"value":"a"}]}`, "Idempotency-Key", "k")
	if p := r.problem(t); r.status != http.StatusNotImplemented || !strings.HasSuffix(p.Type, "not-implemented") {
		t.Fatalf("%d %+v", r.status, p)
	}
}
