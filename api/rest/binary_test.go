package rest_test

import (
	"context"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/runnel/runnel/api"
	"github.com/runnel/runnel/api/rest"
)

// batchBackend keeps the batch bodies it is given as they are (api does not
// look inside them: the server checks them) and serves them back.
type batchBackend struct {
	fullBackend
	mu      sync.Mutex
	batches []byte
}

func (b *batchBackend) ProduceBatches(_ context.Context, topic string, p int32, batches []byte, acks, maxRecords int) (int64, int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.batches = append(b.batches, batches...)
	return 7, 2, nil
}

func (b *batchBackend) ConsumeBatches(_ context.Context, req api.ConsumeRequest) (api.BatchResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return api.BatchResult{Batches: b.batches, Records: 2, NextOffset: 9, HighWatermark: 9}, nil
}

// The binary media types through the handler, every response checked
// against openapi.yaml: octet-stream records (key and headers from HTTP
// headers) read back as JSON, batch bodies passed through both ways.
func TestProduceBinaryMediaTypes(t *testing.T) {
	e := newEnv(t, func(_ *rest.Options, m *memBackend) api.Backend { return &batchBackend{fullBackend: fullBackend{m}} })
	e.createTopic("b", 2)
	r := e.do("POST", "/v1/topics/b/records?partition=1", "raw value\n",
		"Content-Type", "application/octet-stream", "Runnel-Key", "k%2Cey", "Runnel-Header", "a=1,b,c=%E2%82%AC", "Runnel-Timestamp", "1700000000000")
	mustStatus(t, r, 200)
	if !strings.Contains(string(r.body), `{"partition":1,"offset":0}`) {
		t.Fatalf("produce: %s", r.body)
	}
	r = e.do("GET", "/v1/topics/b/partitions/1/records?encoding=string", "")
	mustStatus(t, r, 200)
	for _, want := range []string{`"key":"k,ey"`, `"value":"raw value\n"`, `"timestamp":1700000000000`,
		`"headers":{"a":"1","b":null,"c":"€"}`} {
		if !strings.Contains(string(r.body), want) {
			t.Fatalf("consumed %s, want %s", r.body, want)
		}
	}
	for _, bad := range []struct{ hdr, value, field string }{
		{"Runnel-Key", "%zz", "header.Runnel-Key"},
		{"Runnel-Header", "a=%", "header.Runnel-Header"},
		{"Runnel-Timestamp", "-5", "header.Runnel-Timestamp"},
	} {
		r = e.do("POST", "/v1/topics/b/records", "v", "Content-Type", "application/octet-stream", bad.hdr, bad.value)
		mustStatus(t, r, 400)
		if p := r.problem(t); p.Field != bad.field {
			t.Fatalf("%s %q: field %q", bad.hdr, bad.value, p.Field)
		}
	}

	r = e.do("POST", "/v1/topics/b/records?partition=1", "BATCH", "Content-Type", api.MediaRecordBatch)
	mustStatus(t, r, 200)
	if string(r.body) != `{"offsets":[{"partition":1,"offset":7},{"partition":1,"offset":8}]}`+"\n" {
		t.Fatalf("batch produce: %s", r.body)
	}
	r = e.do("POST", "/v1/topics/b/records", "BATCH", "Content-Type", api.MediaRecordBatch)
	mustStatus(t, r, 400)
	if p := r.problem(t); p.Field != "query.partition" {
		t.Fatalf("batch without partition: %+v", p)
	}
	r = e.do("GET", "/v1/topics/b/partitions/1/records", "", "Accept", api.MediaRecordBatch)
	mustStatus(t, r, 200)
	if string(r.body) != "BATCH" || r.header.Get("Content-Type") != api.MediaRecordBatch || r.header.Get(api.HeaderNextOffset) != "9" {
		t.Fatalf("batch consume: %q %v", r.body, r.header)
	}
	r = e.do("GET", "/v1/topics/b/partitions/1/records?"+url.Values{"offset": {"0"}}.Encode(), "", "Accept", "application/json, "+api.MediaRecordBatch)
	if mustStatus(t, r, 200); !strings.HasPrefix(string(r.body), `{"records":`) {
		t.Fatalf("JSON listed first: %s", r.body)
	}
}

// A backend without BatchBackend answers batch bodies 501.
func TestProduceBatchNotImplemented(t *testing.T) {
	e := newEnv(t)
	e.createTopic("b", 1)
	mustStatus(t, e.do("POST", "/v1/topics/b/records?partition=0", "BATCH", "Content-Type", api.MediaRecordBatch), 501)
	mustStatus(t, e.do("GET", "/v1/topics/b/partitions/0/records", "", "Accept", api.MediaRecordBatch), 501)
}
