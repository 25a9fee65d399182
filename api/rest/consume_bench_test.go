package rest

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/runnel/runnel/api"
)

// streamBackend serves one partition of prepared records through
// ConsumeEach, as the node does (each record handed over straight from
// its decoded batch), so BenchmarkConsumeHandler measures the HTTP layer.
type streamBackend struct {
	api.Backend
	recs []api.ConsumedRecord
}

func (streamBackend) Ready() error { return nil }

func (s streamBackend) ConsumeEach(_ context.Context, req api.ConsumeRequest, each func(*api.ConsumedRecord) error) (api.ConsumeResult, error) {
	n := min(req.MaxRecords, len(s.recs))
	var cr api.ConsumedRecord // reused, as the node reuses its record view
	for i := range n {
		cr = s.recs[i]
		if err := each(&cr); err != nil {
			return api.ConsumeResult{}, err
		}
	}
	return api.ConsumeResult{NextOffset: int64(n), HighWatermark: int64(len(s.recs))}, nil
}

// discardWriter is a ResponseWriter that counts the body and keeps none
// of it (a recorder would hold the whole answer).
type discardWriter struct {
	h      http.Header
	status int
	n      int64
}

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) WriteHeader(status int)      { d.status = status }
func (d *discardWriter) Write(p []byte) (int, error) { d.n += int64(len(p)); return len(p), nil }

// BenchmarkConsumeHandler is one 4,000-record JSON consume (1 KiB values,
// encoding=base64, max_bytes 4 MiB as in `make bench-http`) through the
// router, validation and the encoder into a discarding writer. The
// baseline, timed in the same iteration, is encoding/base64 of the same
// values alone (the least a base64 JSON answer cost with the standard
// library): json_vs_base64 is the whole request's time as a multiple of
// it. Also MB/s of record values and allocations per record.
func BenchmarkConsumeHandler(b *testing.B) {
	const n, size = 4000, 1024
	be := streamBackend{}
	value := make([]byte, size)
	for i := range value {
		value[i] = byte(i*131 + i>>3)
	}
	now := time.Now()
	for i := range n {
		be.recs = append(be.recs, api.ConsumedRecord{Offset: int64(i), Timestamp: now, Value: value})
	}
	h, err := NewHandler(be, Options{})
	if err != nil {
		b.Fatal(err)
	}
	req := httptest.NewRequest("GET", "/v1/topics/bench/partitions/0/records?offset=0&max_records=4000&max_bytes=4194304&encoding=base64", nil)
	serve := func() {
		w := &discardWriter{h: http.Header{}}
		h.ServeHTTP(w, req)
		if w.status != http.StatusOK || w.n < n*size {
			b.Fatalf("status %d, %d bytes", w.status, w.n)
		}
	}
	serve() // warm the pools up
	dst := make([]byte, base64.StdEncoding.EncodedLen(size))
	var jsonTime, baseTime time.Duration
	for b.Loop() {
		start := time.Now()
		serve()
		jsonTime += time.Since(start)
		start = time.Now()
		for _, r := range be.recs {
			base64.StdEncoding.Encode(dst, r.Value)
		}
		baseTime += time.Since(start)
	}
	b.ReportMetric(jsonTime.Seconds()/baseTime.Seconds(), "json_vs_base64")
	b.ReportMetric(float64(b.N)*n*size/1e6/jsonTime.Seconds(), "json_MB/s")
	b.ReportMetric(testing.AllocsPerRun(3, serve)/n, "allocs/record")
}
