package rest

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/runnel/runnel/api"
)

// discardBackend accepts every produce without storing it, so the benchmarks
// measure the HTTP layer alone.
type discardBackend struct{ api.Backend }

func (discardBackend) Ready() error { return nil }
func (discardBackend) Produce(_ context.Context, _ string, recs []api.ProduceRecord, _ int) ([]api.RecordOffset, error) {
	return make([]api.RecordOffset, len(recs)), nil
}

// batchBody is a produce body of n small JSON records (api's
// BenchmarkDecodeProduce100 decodes the same).
func batchBody(n int) []byte {
	var recs []string
	for i := range n {
		recs = append(recs, fmt.Sprintf(`{"key":"user-%d","value":{"id":%d,"name":"someone","tags":["a","b"],"score":12.5}}`, i, i))
	}
	return []byte(`{"records":[` + strings.Join(recs, ",") + `]}`)
}

// BenchmarkHandlerProduce100 is a whole produce request through the router,
// middleware and kin-openapi validation (no network, no storage).
func BenchmarkHandlerProduce100(b *testing.B) {
	h, err := NewHandler(discardBackend{}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	body := batchBody(100)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		req := httptest.NewRequest("POST", "/v1/topics/bench/records", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("%d %s", w.Code, w.Body)
		}
	}
}
