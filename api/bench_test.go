package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// discardBackend accepts every produce without storing it, so the benchmarks
// measure the HTTP layer alone.
type discardBackend struct{ Backend }

func (discardBackend) Ready() error { return nil }
func (discardBackend) Produce(_ context.Context, _ string, recs []ProduceRecord, _ int) ([]RecordOffset, error) {
	return make([]RecordOffset, len(recs)), nil
}

func batchBody(n int) []byte {
	var recs []string
	for i := range n {
		recs = append(recs, fmt.Sprintf(`{"key":"user-%d","value":{"id":%d,"name":"someone","tags":["a","b"],"score":12.5}}`, i, i))
	}
	return []byte(`{"records":[` + strings.Join(recs, ",") + `]}`)
}

// BenchmarkDecodeProduce100 is the baseline: decoding a 100-record batch.
func BenchmarkDecodeProduce100(b *testing.B) {
	body := batchBody(100)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := decodeProduceJSON(body, EncodingJSON, DefaultMaxProduceRecords); err != nil {
			b.Fatal(err)
		}
	}
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

// BenchmarkUnmarshalGeneric100 calibrates: encoding/json into generic values.
func BenchmarkUnmarshalGeneric100(b *testing.B) {
	body := batchBody(100)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		var v any
		if err := json.Unmarshal(body, &v); err != nil {
			b.Fatal(err)
		}
	}
}
